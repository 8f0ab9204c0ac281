// bench/scenarios.hpp: the lock benchmark scenarios A-D (BENCHMARKS.md says what each
// measures), implemented once and used by bench/lock_bench (the side-by-side harness) and by
// `dlock bench` (the CLI); implementation in bench/scenarios.cpp.
#pragma once

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::bench {

enum class scenario {
    uncontended,       ///< A: one worker, sequential acquire+release on one key
    many_keys,         ///< B: `workers` concurrent workers on `keys` keys over ONE client
    contended_counter, ///< C: `workers` workers on one key; GET counter, SET counter+1 inside
    handoff,           ///< D: holder releases while one waiter is blocked in acquire
};

/// A lock object of `kind` on `name` (read and write: the two sides of a read-write lock; the
/// other backends' kinds, e.g. PostgreSQL's lease and shedlock rows, through basic_mutex).
std::unique_ptr<basic_mutex> make(client& c, lock_kind kind, const std::string& name);

struct options {
    std::string url = "redis://127.0.0.1:6379";
    lock_kind kind = lock_kind::reentrant;
    /// lock_kind::semaphore: how many holders the semaphore admits (each pair takes one permit).
    unsigned permits = 1;
    /// Redis, lock_kind::semaphore, A and B only: each pair runs Redisson's own
    /// RPermitExpirableSemaphore tryAcquire and tryRelease scripts (verbatim, by EVALSHA through
    /// redis::command) instead of dlock's: the server cost of Redisson's layout, driven by this
    /// client. Redisson's waiting is Java code, not a script, so C and D refuse it.
    bool redisson_scripts = false;
    scenario which = scenario::uncontended;
    unsigned workers = 1;
    unsigned keys = 1;
    std::chrono::milliseconds duration{3000}; ///< run length (A, B); upper bound (C, D)
    std::chrono::milliseconds lease{30000};   ///< fixed lease of every acquisition
    std::uint64_t max_ops = 0; ///< C: critical sections in total (0 = until duration); D: samples
    /// C/D: each worker (D: the waiter) its own dlock::client (own connections), as separate
    /// processes would be; false: all workers share the main client (local hand-over).
    bool client_per_worker = false;
    /// client_options::handover (false: every release deletes and publishes, as Redisson).
    bool handover = true;
    /// B: workers are asynchronous chains on the client's I/O thread (async_acquire, then
    /// lease::async_release, repeat), like the Node peers' B; false: one OS thread per worker
    /// calling the blocking mutex API.
    bool async = false;
    /// How blocking calls do their I/O (client_options::sync_io).
    blocking_io sync_io = blocking_io::caller_thread;
    std::string key_prefix = "dlock-bench";
    /// C: the counter is a plain integer in this process (read, yield, write) instead of a
    /// Redis key (GET, SET). Always so on a backend other than Redis, which has no key space;
    /// an increment lost to broken exclusion shows as counter_exact false either way.
    bool local_counter = false;
};

struct result {
    std::uint64_t ops = 0; ///< acquire+release pairs (critical sections)
    double seconds = 0;
    double ops_per_s = 0;
    double acquire_p50_us = 0, acquire_p99_us = 0, acquire_max_us = 0; ///< lock() call -> held
    double pair_p50_us = 0, pair_p99_us = 0;       ///< A, B: lock() + unlock() together
    double handoff_p50_us = 0, handoff_p99_us = 0; ///< release by one worker -> acquire by another
    std::uint64_t handoff_samples = 0;
    /// Every hand-off sample in microseconds, sorted (C, D): what bench/charts.py draws the
    /// CDFs from (lock_bench --samples FILE writes them, one per line).
    std::vector<double> handoff_us{};
    /// D only: PING round trip after the same idle pause as a hand-off (the fair RTT unit).
    double idle_rtt_p50_us = 0, idle_rtt_p99_us = 0;
    std::uint64_t per_worker_min = 0, per_worker_max = 0;
    double self_reacquire_share = 0;     ///< acquisitions by the worker that released just before
    std::optional<bool> counter_exact{}; ///< C only
    /// Redis only (0 elsewhere): INFO commandstats delta / ops (includes redis.call)
    double server_cmds_per_op = 0;
    double server_cpu_us_per_op = 0; ///< Redis only (0 elsewhere): INFO used_cpu_sys+user / ops
    double client_cpu_us_per_op = 0; ///< getrusage(RUSAGE_SELF) delta / ops
};

/// Runs one scenario against options.url. Throws dlock::error on connection failures.
result run(const options& o);

/// One JSON object with every field of `r` (keys as named above).
std::string to_json(const result& r);

/// The `p` quantile (0..1) of `v`, nearest rank below; 0 when `v` is empty. Sorts `v`.
double percentile(std::vector<double>& v, double p);

} // namespace dlock::bench
