// cli.cpp: the command line of `dlock` (CLI11) and the one place where errors become one line
// on stderr and an exit code.
#include "cli.hpp"

#include "commands.hpp"

#include <CLI/CLI.hpp>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#ifndef DLOCK_CLI_VERSION
#define DLOCK_CLI_VERSION "unknown"
#endif

namespace dlock::cli {
namespace {

std::string footer() {
    return std::string(R"(Durations: 250ms, 30s, 5m, 1h, or 0.
URL: --url, else $DLOCK_URL, else redis://127.0.0.1:6379; $DLOCK_PASSWORD overrides the password.
)") + exit_code_help;
}

/// The commands, for the "unknown command" message (CLI11 would say "A subcommand is
/// required").
constexpr const char* command_names[] = {"exec", "elect",  "leader", "status", "list",
                                         "keys", "unlock", "demo",   "bench"};

/// The first word of argv that is neither a global option nor its value, if it is no command.
std::optional<std::string> unknown_command(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--url") {
            ++i;
            continue;
        }
        if (a.starts_with("-")) continue; // --url=U, --help, --version, or a bad option
        for (const char* c : command_names)
            if (a == c) return std::nullopt;
        return std::string(a);
    }
    return std::nullopt;
}

/// Thrown by the --version flag's callback, which runs before the subcommand requirement.
struct version_requested {};

/// The --interval of --watch: a duration of at least 50 ms.
std::chrono::milliseconds interval_arg(const std::string& text) {
    const auto d = duration_arg("--interval", text);
    if (d < std::chrono::milliseconds(50)) throw usage_error("--interval must be at least 50ms");
    return d;
}

} // namespace

int run(int argc, char** argv, std::ostream& out, std::ostream& err) {
    // `exec NAME -- CMD ARGS...`: everything after the first "--" is the child's command line,
    // untouched by option parsing.
    std::vector<std::string> child;
    bool has_separator = false;
    int parse_argc = argc;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--") == 0) {
            child.assign(argv + i + 1, argv + argc);
            has_separator = true;
            parse_argc = i;
            break;
        }

    if (auto bad = unknown_command(parse_argc, argv)) {
        err << "dlock: unknown command '" << one_line(*bad)
            << "' (commands: exec, elect, leader, status, list, keys, unlock, demo, bench; see "
               "dlock --help)\n";
        return exit_code::usage;
    }

    CLI::App app{"dlock: distributed locks on Redis, ZooKeeper, PostgreSQL and etcd, sharing locks "
                 "with Redisson, Curator, ShedLock and etcdctl",
                 "dlock"};
    app.require_subcommand(1);
    app.fallthrough(); // inherited: `--url` may also follow the command (`dlock demo --url U`)
    app.footer(footer());
    global_options g;
    app.add_option("--url", g.urls,
                   "Server URL: redis://, rediss://, unix://, redis-sentinel://, "
                   "rediss-sentinel://, redis-cluster://, zk://, postgresql:// (postgres://); "
                   "redlock:// (rediss-redlock://: Redlock over comma-separated masters); "
                   "repeatable with Redis URLs (several mean Redlock over those masters). "
                   "Default $DLOCK_URL, else redis://127.0.0.1:6379");
    app.add_flag_callback(
        "--version", [] { throw version_requested{}; }, "Print the version and exit");

    exec_options ex;
    std::string wait, lease, watchdog, kill_after = "5s", warn_signal, warn_margin, max_hold,
                                       once_per, on_failure = "keep";
    int taken_exit = 0;
    unsigned permits = 0;
    auto* exec = app.add_subcommand("exec", "Run a command while holding a lock: exec NAME -- CMD");
    exec->add_option("--wait", wait, "Give up after this long (0: one try; default: forever)");
    exec->add_option("--lease", lease, "Fixed lease, not renewed (default: the watchdog renews)");
    exec->add_option("--watchdog", watchdog, "Lease the watchdog renews every third of (30s)");
    exec->add_option(
            "--kind", ex.kind,
            "lock (reentrant, default; simple on Redlock) | simple | fair | read | write | "
            "shedlock | lease | versioned | semaphore")
        ->check(CLI::IsMember(kind_choices()));
    exec->add_option("--permits", permits,
                     "With --kind semaphore: how many hold it at once (>= 1; every client of it "
                     "passes the same)");
    exec->add_option("--kill-after", kill_after, "On loss: SIGKILL this long after SIGTERM (5s)");
    exec->add_option("--warn-signal", warn_signal,
                     "Send the command this signal (USR1, SIGUSR1, 10) when the lease is not "
                     "being renewed and less than --warn-margin of it is left, before the loss");
    exec->add_option("--warn-margin", warn_margin,
                     "With --warn-signal: how much of the lease is left at the warning (default: "
                     "a third of the lease)");
    exec->add_option("--max-hold", max_hold,
                     "Hold the lock at most this long: then it is released and the command "
                     "stopped as for a loss (exit 73); --warn-signal comes --warn-margin before");
    exec->add_option("--once-per", once_per,
                     "Run at most once per slot of this period, counted on the server's clock "
                     "(a slot claimed already: the command is not run)");
    exec->add_option("--taken-exit", taken_exit,
                     "With --once-per: the exit status when the slot was taken (default 0)")
        ->check(CLI::Range(0, 255));
    exec->add_option("--on-failure", on_failure,
                     "With --once-per: keep (default: a failed run keeps its slot) | release "
                     "(another machine may run in the same slot)")
        ->check(CLI::IsMember({"keep", "release"}));
    exec->add_option("name", ex.name, "Lock name")->required();

    elect_options el;
    std::string elect_wait, elect_kill_after = "5s", elect_watchdog;
    auto* elect = app.add_subcommand(
        "elect", "Run a command while leading an election (Redis, ZooKeeper, etcd, PostgreSQL): "
                 "elect NAME -- CMD");
    elect->add_option("--value", el.value,
                      "This participant's value, which `leader` shows (default: empty)");
    elect->add_option("--wait", elect_wait,
                      "Give up after this long (0: one try; default: forever)");
    elect->add_option("--kill-after", elect_kill_after,
                      "On loss: SIGKILL this long after SIGTERM (5s)");
    elect->add_option("--watchdog", elect_watchdog,
                      "Redis: the leader's lease, renewed every third of it (30s); a dead "
                      "leader's successor leads after it");
    elect->add_option("name", el.name, "Election name")->required();

    std::string leader_name;
    bool leader_json = false, leader_watch = false;
    auto* leader = app.add_subcommand("leader", "The leader of an election: value and epoch");
    leader->add_flag("--json", leader_json, "Print one JSON object (per line with --watch)");
    leader->add_flag("--watch", leader_watch,
                     "Print the leader now and after every change until Ctrl-C");
    leader->add_option("name", leader_name, "Election name")->required();

    std::vector<std::string> status_names;
    bool status_json = false, status_watch = false;
    std::string status_interval = "1s";
    auto* status = app.add_subcommand("status", "Holders, hold counts, lease, waiters, fencing");
    status->add_flag("--json", status_json, "Print one JSON object per lock (one per line)");
    status->add_flag("--watch", status_watch,
                     "Live view, refreshed in place on a terminal; q or Ctrl-C quits");
    status->add_option("--interval", status_interval, "Refresh period of --watch (1s)");
    status->add_option("name", status_names, "Lock name(s)")->required();

    std::string pattern = "*";
    bool list_json = false, list_watch = false;
    std::string list_interval = "1s";
    auto* list = app.add_subcommand("list", "Locks that exist now");
    list->add_flag("--json", list_json, "Print one JSON array");
    list->add_flag("--watch", list_watch,
                   "Live view, refreshed in place on a terminal; q or Ctrl-C quits");
    list->add_option("--interval", list_interval, "Refresh period of --watch (1s)");
    list->add_option("pattern", pattern, "SCAN MATCH pattern (default *)");

    std::string keys_name, keys_kind = "lock";
    auto* keys = app.add_subcommand("keys", "The Redis keys a lock uses (no server needed)");
    keys->add_option("--kind", keys_kind, "lock (default) | simple | fair | read | write")
        ->check(CLI::IsMember(kind_choices()));
    keys->add_option("name", keys_name, "Lock name")->required();

    std::string unlock_name;
    bool force = false;
    auto* unlock = app.add_subcommand("unlock", "Break a stuck lock (any kind), wake its waiters");
    unlock
        ->add_flag("--force", force,
                   "Required: delete the lock whoever holds it (PostgreSQL advisory: ends the "
                   "holder's session, so every lock on that session is lost)")
        ->required();
    unlock->add_option("name", unlock_name, "Lock name")->required();

    demo_options demo_opts;
    auto* demo = app.add_subcommand(
        "demo", "Stock-deduction demo: lost updates without a lock, exact with dlock::mutex. "
                "Without --url (which may follow 'demo') it starts a private redis-server");
    demo->add_option("--processes", demo_opts.processes, "Worker processes (2)")
        ->check(CLI::Range(1, 32));
    demo->add_option("--threads", demo_opts.threads, "Threads per process (4)")
        ->check(CLI::Range(1, 64));
    demo->add_option("--stock", demo_opts.stock, "Initial stock (200)")
        ->check(CLI::Range(1, 100000));
    demo->add_option("--backend", demo_opts.backend,
                     "Where the lock lives: redis (the stock's server), zookeeper, postgresql or "
                     "etcd (a private server it starts; needs Debian's zookeeper, postgresql-15 "
                     "or etcd-server)")
        ->check(CLI::IsMember({"redis", "zookeeper", "postgresql", "etcd"}));

    bench_options bo;
    auto* bench = app.add_subcommand("bench", "Lock throughput and hand-off latency");
    bench
        ->add_option("--scenario", bo.scenario,
                     "A uncontended | B many keys | C contended counter | D hand-off (A)")
        ->check(CLI::IsMember({"A", "B", "C", "D"}));
    bench->add_option("--kind", bo.kind, "lock | simple | fair | read | write")
        ->check(CLI::IsMember(kind_choices()));
    bench->add_option("--workers", bo.workers, "Concurrent workers (scenario default)")
        ->check(CLI::Range(1u, 10000u));
    bench->add_option("--keys", bo.keys, "Distinct lock names for B (= workers)")
        ->check(CLI::Range(1u, 1000000u));
    bench->add_option("--seconds", bo.seconds, "Run length (3)")->check(CLI::Range(0.1, 3600.0));
    bench->add_flag("--json", bo.json, "Print one JSON object");

    try {
        app.parse(parse_argc, argv);
    } catch (const version_requested&) {
        out << "dlock " << DLOCK_CLI_VERSION << "\n";
        return exit_code::ok;
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return exit_code::ok;
    } catch (const CLI::CallForAllHelp&) {
        out << app.help("", CLI::AppFormatMode::All);
        return exit_code::ok;
    } catch (const CLI::RequiredError& e) {
        if (app.get_subcommands().empty()) {
            err << "dlock: a command is required: dlock [--url URL] COMMAND ... (commands: exec, "
                   "elect, leader, status, list, keys, unlock, demo, bench; see dlock --help)\n";
            return exit_code::usage;
        }
        err << "dlock: " << one_line(e.what()) << " (see dlock --help)\n";
        return exit_code::usage;
    } catch (const CLI::ParseError& e) {
        err << "dlock: " << one_line(e.what()) << " (see dlock --help)\n";
        return exit_code::usage;
    }

    try {
        if (exec->parsed()) {
            if (!has_separator || child.empty())
                throw usage_error("exec needs a command: dlock exec NAME -- CMD [ARGS...]");
            ex.command = std::move(child);
            if (!wait.empty()) ex.wait = duration_arg("--wait", wait);
            if (!lease.empty()) {
                ex.lease = duration_arg("--lease", lease);
                if (ex.lease->count() == 0) throw usage_error("--lease must be longer than 0");
            }
            if (!watchdog.empty()) ex.watchdog = duration_arg("--watchdog", watchdog);
            ex.kill_after = duration_arg("--kill-after", kill_after);
            if (!warn_signal.empty()) {
                const auto sig = signal_from_name(warn_signal);
                if (!sig)
                    throw usage_error("--warn-signal: '" + one_line(warn_signal) +
                                      "' is not a signal (a name such as USR1 or a number)");
                ex.warn_signal = *sig;
            }
            if (!once_per.empty()) {
                ex.once_per = duration_arg("--once-per", once_per);
                if (ex.once_per->count() < 1) throw usage_error("--once-per must be at least 1ms");
                ex.once_taken_exit = taken_exit;
                ex.once_release_on_failure = on_failure == "release";
            } else if (exec->count("--taken-exit") != 0 || exec->count("--on-failure") != 0) {
                throw usage_error("--taken-exit and --on-failure go with --once-per");
            }
            if (!max_hold.empty()) {
                ex.max_hold = duration_arg("--max-hold", max_hold);
                if (ex.max_hold->count() < 1) throw usage_error("--max-hold must be at least 1ms");
            }
            if (!warn_margin.empty()) {
                if (warn_signal.empty()) throw usage_error("--warn-margin goes with --warn-signal");
                ex.warn_margin = duration_arg("--warn-margin", warn_margin);
            }
            if (exec->count("--permits") != 0) {
                if (ex.kind != "semaphore")
                    throw usage_error("--permits goes with --kind semaphore");
                if (permits < 1) throw usage_error("--permits must be at least 1");
                ex.permits = permits;
            } else if (ex.kind == "semaphore") {
                throw usage_error("--kind semaphore needs --permits N");
            }
            return run_exec(g, ex, err);
        }
        if (elect->parsed()) {
            if (!has_separator || child.empty())
                throw usage_error("elect needs a command: dlock elect NAME -- CMD [ARGS...]");
            el.command = std::move(child);
            if (!elect_wait.empty()) el.wait = duration_arg("--wait", elect_wait);
            el.kill_after = duration_arg("--kill-after", elect_kill_after);
            if (!elect_watchdog.empty()) {
                el.watchdog = duration_arg("--watchdog", elect_watchdog);
                if (el.watchdog->count() < 30)
                    throw usage_error("--watchdog must be at least 30ms");
            }
            return run_elect(g, el, err);
        }
        if (has_separator) throw usage_error("'--' is only valid with exec and elect");
        if (leader->parsed()) return run_leader(g, leader_name, leader_json, leader_watch, out);
        const bool terminal = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
        if (status->parsed() && status_watch) {
            if (status_json) throw usage_error("--watch and --json do not go together");
            return run_watch(g,
                             {.names = status_names,
                              .pattern = std::nullopt,
                              .interval = interval_arg(status_interval),
                              .terminal = terminal},
                             out);
        }
        if (status->parsed() && status->count("--interval"))
            throw usage_error("--interval goes with --watch");
        if (status->parsed()) return run_status(g, status_names, status_json, out);
        if (list->parsed() && list_watch) {
            if (list_json) throw usage_error("--watch and --json do not go together");
            return run_watch(g,
                             {.names = {},
                              .pattern = pattern,
                              .interval = interval_arg(list_interval),
                              .terminal = terminal},
                             out);
        }
        if (list->parsed() && list->count("--interval"))
            throw usage_error("--interval goes with --watch");
        if (list->parsed()) return run_list(g, pattern, list_json, out);
        if (unlock->parsed()) return run_unlock(g, unlock_name, out);
        if (keys->parsed()) return run_keys(keys_name, keys_kind, out);
        if (demo->parsed()) return run_demo(g, demo_opts, out, err);
        if (bench->parsed()) return run_bench(g, bo, out, err);
    } catch (const usage_error& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code::usage;
    } catch (const failure& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return e.code;
    } catch (const dlock::error& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code_for(e.code());
    } catch (const std::system_error& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code::os_error;
    } catch (const std::exception& e) {
        err << "dlock: internal error: " << one_line(e.what()) << "\n";
        return exit_code::software;
    }
    return exit_code::usage;
}

} // namespace dlock::cli
