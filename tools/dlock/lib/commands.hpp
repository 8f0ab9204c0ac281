// commands.hpp: the commands of `dlock`, each a function of its parsed options that returns
// the process exit code (see common.hpp). They throw usage_error for usage errors and
// dlock::error for library errors; cli::run() turns both into one line on stderr.
#pragma once

#include "common.hpp"

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dlock::cli {

/// `dlock exec`.
struct exec_options {
    std::optional<std::chrono::milliseconds> wait{};     ///< nullopt: forever; zero: one try
    std::optional<std::chrono::milliseconds> lease{};    ///< nullopt: watchdog-renewed lease
    std::optional<std::chrono::milliseconds> watchdog{}; ///< client_options::watchdog_lease
    std::string kind = "lock";                           ///< lock | simple | fair | read | write
    std::chrono::milliseconds kill_after{5000};          ///< SIGTERM -> SIGKILL after a loss
    std::string name{};
    std::vector<std::string> command{}; ///< argv of the child; non-empty
};

/// Holds lock `o.name` while `o.command` runs (`dlock exec`, see the man text in cli.cpp).
/// Blocking: until the child has exited and the lock is released (or not acquired / lost).
/// Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the child while it runs (not
/// when the kernel sent them to the whole foreground process group, which includes the child);
/// while waiting for the lock they end the wait, and dlock exits 128 + signal.
/// Exit: the child's status (128 + signal when a signal killed it), 75 not acquired within
/// --wait, 73 lease lost while the child ran (child sent SIGTERM, then SIGKILL after
/// --kill-after), 69 unreachable / auth failed, 64 usage, 127 / 126 command not found / not
/// executable.
int run_exec(const global_options& g, const exec_options& o, std::ostream& err);

/// `dlock status [--json] NAME`: holders, hold counts, remaining lease, waiters, fencing
/// counter of one lock, read directly from the Redisson / redis-py layout.
/// Exit: 0 (also when no lock exists: kind "none"); 1 when NAME holds something else.
int run_status(const global_options& g, const std::string& name, bool json, std::ostream& out);

/// `dlock list [--json] [PATTERN]`: the locks that exist now among the keys matching PATTERN
/// (SCAN MATCH syntax), with the fields of status. Exit: 0.
int run_list(const global_options& g, const std::string& pattern, bool json, std::ostream& out);

/// `dlock keys [--kind lock|simple] NAME`: the Redis keys a lock of that kind uses (N and its
/// type, the unlock channel, the fencing counter), as the library writes them. Needs no server.
/// Exit: 0; 64 for a name no lock may have or an unknown kind.
int run_keys(const std::string& name, const std::string& kind, std::ostream& out);

/// `dlock unlock --force NAME`: deletes the lock whoever holds it and publishes the unlock
/// message on its channel so waiters wake. Exit: 0 whether or not a lock existed (the output
/// says which); 1 when NAME holds something that is not a lock (left untouched).
int run_unlock(const global_options& g, const std::string& name, std::ostream& out);

/// `dlock demo`.
struct demo_options {
    int processes = 2; ///< worker processes, each with its own client
    int threads = 4;   ///< threads per process
    int stock = 200;   ///< initial stock of each run
};

/// The stock-deduction demo: one run without a lock (lost updates), one with dlock::mutex
/// (exact), with throughput and hand-off latency. Uses --url when given (never $DLOCK_URL),
/// otherwise a private redis-server it starts and stops. Exit: 0 when the locked run was
/// exact, 1 otherwise; 128 + signal when interrupted.
int run_demo(const global_options& g, const demo_options& o, std::ostream& out, std::ostream& err);

/// `dlock bench`.
struct bench_options {
    std::string scenario = "A"; ///< A | B | C | D (BENCHMARKS.md)
    std::string kind = "lock";  ///< lock | simple
    unsigned workers = 0;       ///< 0: the scenario's default
    unsigned keys = 0;          ///< 0: the scenario's default
    double seconds = 3;         ///< run length
    bool json = false;
};

/// Runs one benchmark scenario (bench/scenarios.hpp) and prints a table or one JSON object.
/// Exit: 0; 1 when this build has no benchmarks.
int run_bench(const global_options& g, const bench_options& o, std::ostream& out,
              std::ostream& err);

} // namespace dlock::cli
