#include "cli.hpp"

#include "commands.hpp"

#include <CLI/CLI.hpp>

#include <cstring>

namespace dlock::cli {

int run(int argc, char** argv, std::ostream& out, std::ostream& err) {
    // `exec NAME -- CMD ARGS...`: everything after the first "--" is the child's command line,
    // untouched by option parsing.
    std::vector<std::string> child;
    int parse_argc = argc;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--") == 0) {
            child.assign(argv + i + 1, argv + argc);
            parse_argc = i;
            break;
        }

    CLI::App app{"dlock: distributed locks on Redis", "dlock"};
    app.require_subcommand(1);
    global_options g;
    app.add_option("--url", g.urls,
                   "Redis URL (repeatable; several mean Redlock). Default $DLOCK_URL or "
                   "redis://127.0.0.1:6379. Password also from $DLOCK_PASSWORD");

    exec_options ex;
    std::string wait, lease, watchdog, kill_after = "5s";
    auto* exec = app.add_subcommand("exec", "Hold a lock while a command runs: exec NAME -- CMD");
    exec->add_option("--wait", wait, "Give up after this long (0 tries once; default: forever)");
    exec->add_option("--lease", lease, "Fixed lease, no renewal (default: watchdog)");
    exec->add_option("--watchdog", watchdog, "Watchdog lease when --lease is not given (30s)");
    exec->add_option("--kind", ex.kind, "lock | simple | fair | read | write")
        ->check(CLI::IsMember({"lock", "simple", "fair", "read", "write"}));
    exec->add_option("--kill-after", kill_after, "SIGKILL this long after SIGTERM on loss");
    exec->add_option("name", ex.name, "Lock name")->required();

    std::string status_name;
    bool status_json = false;
    auto* status = app.add_subcommand("status", "Holders, lease, waiters, fencing counter");
    status->add_flag("--json", status_json, "One JSON object");
    status->add_option("name", status_name, "Lock name")->required();

    std::string pattern = "*";
    bool list_json = false;
    auto* list = app.add_subcommand("list", "Locks that exist now");
    list->add_flag("--json", list_json, "A JSON array");
    list->add_option("pattern", pattern, "SCAN MATCH pattern (default *)");

    std::string unlock_name;
    bool force = false;
    auto* unlock = app.add_subcommand("unlock", "Break a stuck lock and wake its waiters");
    unlock->add_flag("--force", force, "Required: delete whoever holds it")->required();
    unlock->add_option("name", unlock_name, "Lock name")->required();

    demo_options demo_opts;
    auto* demo = app.add_subcommand("demo", "Stock-deduction demo: lost updates vs a lock");
    demo->add_option("--processes", demo_opts.processes, "Processes (2)")->check(CLI::Range(1, 32));
    demo->add_option("--threads", demo_opts.threads, "Threads per process (4)")
        ->check(CLI::Range(1, 64));
    demo->add_option("--stock", demo_opts.stock, "Initial stock (200)")
        ->check(CLI::Range(1, 1000000));

    bench_options bo;
    auto* bench = app.add_subcommand("bench", "Lock throughput and hand-off latency");
    bench->add_option("--scenario", bo.scenario, "A | B | C | D (see BENCHMARKS.md)")
        ->check(CLI::IsMember({"A", "B", "C", "D"}));
    bench->add_option("--kind", bo.kind, "lock | simple")->check(CLI::IsMember({"lock", "simple"}));
    bench->add_option("--workers", bo.workers, "Concurrent workers");
    bench->add_option("--keys", bo.keys, "Distinct lock names (B)");
    bench->add_option("--seconds", bo.seconds, "Run length")->check(CLI::Range(0.1, 3600.0));
    bench->add_flag("--json", bo.json, "One JSON object");

    try {
        app.parse(parse_argc, argv);
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return 0;
    } catch (const CLI::CallForAllHelp&) {
        out << app.help("", CLI::AppFormatMode::All);
        return 0;
    } catch (const CLI::ParseError& e) {
        err << "dlock: " << e.what() << "\n";
        return exit_code::usage;
    }

    try {
        if (exec->parsed()) {
            if (child.empty()) throw usage_error("exec needs a command after --");
            ex.command = child;
            if (!wait.empty()) ex.wait = duration_arg("--wait", wait);
            if (!lease.empty()) {
                ex.lease = duration_arg("--lease", lease);
                if (ex.lease->count() == 0) throw usage_error("--lease must be positive");
            }
            if (!watchdog.empty()) ex.watchdog = duration_arg("--watchdog", watchdog);
            ex.kill_after = duration_arg("--kill-after", kill_after);
            return run_exec(g, ex, err);
        }
        if (!child.empty()) throw usage_error("'--' is only valid with exec");
        if (status->parsed()) return run_status(g, status_name, status_json, out, err);
        if (list->parsed()) return run_list(g, pattern, list_json, out, err);
        if (unlock->parsed()) return run_unlock(g, unlock_name, out, err);
        if (demo->parsed()) return run_demo(g, demo_opts, out, err);
        if (bench->parsed()) return run_bench(g, bo, out, err);
    } catch (const usage_error& e) {
        err << "dlock: " << e.what() << "\n";
        return exit_code::usage;
    } catch (const dlock::error& e) {
        err << "dlock: " << e.what() << "\n";
        return exit_code_for(e.code());
    } catch (const std::exception& e) {
        err << "dlock: " << e.what() << "\n";
        return exit_code::failure;
    }
    return exit_code::usage;
}

} // namespace dlock::cli
