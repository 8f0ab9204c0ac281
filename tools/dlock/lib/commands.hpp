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
    std::string kind{};   ///< a kind_name; empty: lock (reentrant), or simple on Redlock
    unsigned permits = 1; ///< --kind semaphore: how many hold it at once
    std::chrono::milliseconds kill_after{5000}; ///< SIGTERM -> SIGKILL after a loss
    int warn_signal = 0; ///< sent to the child at the lease's warning (0: none)
    std::optional<std::chrono::milliseconds> warn_margin{}; ///< acquire_options::warn_margin
    std::optional<std::chrono::milliseconds> max_hold{};    ///< acquire_options::max_hold
    /// --once-per: run at most once per slot of this period (server clock; dlock/once.hpp)
    std::optional<std::chrono::milliseconds> once_per{};
    int once_taken_exit = 0;              ///< --taken-exit: the status of a skipped run
    bool once_release_on_failure = false; ///< --on-failure release: a failed run frees the slot
    std::string name{};
    std::vector<std::string> command{}; ///< argv of the child; non-empty
};

/// Holds lock `o.name` while `o.command` runs (`dlock exec`, see the man text in cli.cpp).
/// Blocking: until the child has exited and the lock is released (or not acquired / lost).
/// Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the child while it runs (not
/// when the kernel sent them to the whole foreground process group, which includes the child);
/// while waiting for the lock they end the wait, and dlock exits 128 + signal.
/// Exit: the child's status (128 + signal when a signal killed it), 75 not acquired within
/// --wait, 73 lease lost while the child ran, --max-hold passing included (child sent SIGTERM,
/// then SIGKILL after --kill-after), 127 / 126 command not found / not executable; every other
/// failure of dlock has its own code (common.hpp: 64 usage, 65 not a lock, 69 unreachable or auth
/// failed, 76 server error, 77 ACL denied, ...).
int run_exec(const global_options& g, const exec_options& o, std::ostream& err);

/// `dlock elect`.
struct elect_options {
    std::optional<std::chrono::milliseconds> wait{}; ///< nullopt: forever; zero: one try
    std::string value{};                             ///< the participant's value (leader shows it)
    std::chrono::milliseconds kill_after{5000};      ///< SIGTERM -> SIGKILL after a loss
    /// client_options::watchdog_lease (Redis: the leader's lease); nullopt: the default
    std::optional<std::chrono::milliseconds> watchdog{};
    std::string name{};
    std::vector<std::string> command{}; ///< argv of the child; non-empty
};

/// Campaigns in the election `o.name` with `o.value` (client::campaign) and runs `o.command`
/// while this process leads, with DLOCK_NAME and DLOCK_EPOCH (the leadership's epoch, a fencing
/// token) in its environment; resigns when the command exits.
/// Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT end the campaign (exit 128 + signal) and are
/// forwarded to the command while it runs.
/// Exit: the command's status (128 + signal when a signal killed it), 75 not elected within
/// --wait, 73 leadership lost while the command ran (it is sent SIGTERM, then SIGKILL after
/// --kill-after), 127 / 126 command not found / not executable; the codes of diagnose() for a
/// library error (64 a bad name, 69 unreachable, 78 a backend without elections, ...).
int run_elect(const global_options& g, const elect_options& o, std::ostream& err);

/// `dlock leader [--json] [--watch] NAME`: the current leader of the election NAME, its value and
/// epoch, or vacant (client::leader); --json: {"name":..,"vacant":false,"value":..,"epoch":N} or
/// {"name":..,"vacant":true}; --watch: that line now and after every change (client::observe)
/// until SIGINT, SIGTERM, SIGHUP or SIGQUIT. Exit: 0 (also when vacant, and when a watch is
/// ended by a signal); 78 on a backend without elections; the codes of diagnose() otherwise.
int run_leader(const global_options& g, const std::string& name, bool json, bool watch,
               std::ostream& out);

/// `dlock status [--json] NAME...`: holders, hold counts, remaining lease, waiters, fencing
/// counter of each lock, as its backend records it (Redis: the Redisson / redis-py layout;
/// ZooKeeper: the lock's nodes; PostgreSQL: pg_locks and the lease tables); --json: one object
/// per line, one schema on every backend (docs/dlock.1, STATUS SCHEMA). Exit: 0 (also when no lock
/// exists: kind "none"); 65 when a NAME holds something else; the codes of diagnose() for a library
/// error.
int run_status(const global_options& g, const std::vector<std::string>& names, bool json,
               std::ostream& out);

/// `dlock status --watch NAME...` / `dlock list --watch [PATTERN]`.
struct watch_options {
    std::vector<std::string> names{};   ///< status: the locks to show
    std::optional<std::string> pattern; ///< list: the SCAN MATCH pattern (names unused)
    std::chrono::milliseconds interval{1000};
    bool terminal = false; ///< `out` is a terminal: refresh in place (ANSI), read keys from stdin
};

/// A live view that reads the locks every `interval` until q (terminal), Ctrl-C, SIGTERM or
/// SIGHUP. On a terminal it redraws in place (alternate screen, ANSI; holders, hold counts,
/// the remaining lease as a bar, waiters and the fair queue, fencing counter, read-write
/// mode); otherwise it prints one block of plain lines per refresh, each headed by a "---"
/// line with the time. A failure of the first read ends it (diagnose()); later failures are
/// shown in the view, which keeps refreshing. Exit: 0 when asked to stop.
int run_watch(const global_options& g, const watch_options& o, std::ostream& out);

/// `dlock list [--json] [PATTERN]`: the locks that exist now among the keys matching PATTERN
/// (SCAN MATCH syntax), with the fields of status. Exit: 0.
int run_list(const global_options& g, const std::string& pattern, bool json, std::ostream& out);

/// `dlock keys [--kind lock|simple] NAME`: the Redis keys a lock of that kind uses (N and its
/// type, the unlock channel, the fencing counter), as the library writes them. Needs no server.
/// Exit: 0; 64 for a name no lock may have or an unknown kind.
int run_keys(const std::string& name, const std::string& kind, std::ostream& out);

/// `dlock unlock --force NAME`: deletes the lock whoever holds it and publishes the unlock
/// message on its channel so waiters wake. Exit: 0 whether or not a lock existed (the output
/// says which); 65 when NAME holds something that is not a lock (left untouched).
int run_unlock(const global_options& g, const std::string& name, std::ostream& out);

/// `dlock demo`.
struct demo_options {
    int processes = 2;             ///< worker processes, each with its own client
    int threads = 4;               ///< threads per process
    int stock = 200;               ///< initial stock of each run
    std::string backend = "redis"; ///< the lock's server: redis, zookeeper, postgresql
};

/// The stock-deduction demo: one run without a lock (lost updates), one with dlock::mutex
/// (exact), with throughput and hand-off latency. Uses --url when given (never $DLOCK_URL),
/// otherwise a private redis-server it starts and stops. Exit: 0 when the locked run was
/// exact, 70 otherwise (a bug); 128 + signal when interrupted.
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
/// Exit: 0; 69 when this build has no benchmarks.
int run_bench(const global_options& g, const bench_options& o, std::ostream& out,
              std::ostream& err);

} // namespace dlock::cli
