// cli.cpp: the command line of `dlock` (CLI11) and the one place where errors become one line
// on stderr and an exit code.
#include "cli.hpp"

#include "commands.hpp"

#include <CLI/CLI.hpp>

#include <cstring>
#include <string>
#include <vector>

#ifndef DLOCK_CLI_VERSION
#define DLOCK_CLI_VERSION "unknown"
#endif

namespace dlock::cli {
namespace {

constexpr const char* footer = R"(Durations: 250ms, 30s, 5m, 1h, or 0.
URL: --url, else $DLOCK_URL, else redis://127.0.0.1:6379; $DLOCK_PASSWORD overrides the password.
Exit codes: exec returns the command's status (128+N when signal N killed it);
  64 usage error, 69 Redis unreachable or authentication failed, 73 lock lost while the
  command ran, 75 not acquired within --wait, 1 other errors.)";

/// Thrown by the --version flag's callback, which runs before the subcommand requirement.
struct version_requested {};

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

    CLI::App app{"dlock: distributed locks on Redis (Redisson-compatible)", "dlock"};
    app.require_subcommand(1);
    app.fallthrough(); // inherited: `--url` may also follow the command (`dlock demo --url U`)
    app.footer(footer);
    global_options g;
    app.add_option("--url", g.urls,
                   "Redis URL; repeatable (several mean Redlock over those masters; exec only)");
    app.add_flag_callback(
        "--version", [] { throw version_requested{}; }, "Print the version and exit");

    exec_options ex;
    std::string wait, lease, watchdog, kill_after = "5s";
    auto* exec = app.add_subcommand("exec", "Run a command while holding a lock: exec NAME -- CMD");
    exec->add_option("--wait", wait, "Give up after this long (0: one try; default: forever)");
    exec->add_option("--lease", lease, "Fixed lease, not renewed (default: the watchdog renews)");
    exec->add_option("--watchdog", watchdog, "Lease the watchdog renews every third of (30s)");
    exec->add_option("--kind", ex.kind, "lock (reentrant, default) | simple | fair | read | write")
        ->check(CLI::IsMember(kind_choices()));
    exec->add_option("--kill-after", kill_after, "On loss: SIGKILL this long after SIGTERM (5s)");
    exec->add_option("name", ex.name, "Lock name")->required();

    std::string status_name;
    bool status_json = false;
    auto* status = app.add_subcommand("status", "Holders, hold counts, lease, waiters, fencing");
    status->add_flag("--json", status_json, "Print one JSON object");
    status->add_option("name", status_name, "Lock name")->required();

    std::string pattern = "*";
    bool list_json = false;
    auto* list = app.add_subcommand("list", "Locks that exist now");
    list->add_flag("--json", list_json, "Print one JSON array");
    list->add_option("pattern", pattern, "SCAN MATCH pattern (default *)");

    std::string keys_name, keys_kind = "lock";
    auto* keys = app.add_subcommand("keys", "The Redis keys a lock uses (no server needed)");
    keys->add_option("--kind", keys_kind, "lock (default) | simple | fair | read | write")
        ->check(CLI::IsMember(kind_choices()));
    keys->add_option("name", keys_name, "Lock name")->required();

    std::string unlock_name;
    bool force = false;
    auto* unlock = app.add_subcommand("unlock", "Break a stuck lock (any kind), wake its waiters");
    unlock->add_flag("--force", force, "Required: delete the lock whoever holds it")->required();
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
            return run_exec(g, ex, err);
        }
        if (has_separator) throw usage_error("'--' is only valid with exec");
        if (status->parsed()) return run_status(g, status_name, status_json, out);
        if (list->parsed()) return run_list(g, pattern, list_json, out);
        if (unlock->parsed()) return run_unlock(g, unlock_name, out);
        if (keys->parsed()) return run_keys(keys_name, keys_kind, out);
        if (demo->parsed()) return run_demo(g, demo_opts, out, err);
        if (bench->parsed()) return run_bench(g, bo, out, err);
    } catch (const usage_error& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code::usage;
    } catch (const dlock::error& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code_for(e.code());
    } catch (const std::exception& e) {
        err << "dlock: " << one_line(e.what()) << "\n";
        return exit_code::failure;
    }
    return exit_code::usage;
}

} // namespace dlock::cli
