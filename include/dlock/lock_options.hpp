// dlock/lock_options.hpp: what an acquisition asks for, independent of the backend.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

namespace dlock {

/// Which lock an acquisition takes.
enum class lock_kind {
    reentrant, ///< Redisson RLock layout, fencing token, pub/sub wake-up (default)
    simple,    ///< SET key token NX PX, compare-and-delete release (redis-py Lock layout)
    fair,      ///< Redisson RFairLock layout: reentrant, waiters served in arrival order
    read,      ///< shared side of a Redisson RReadWriteLock-compatible lock (no fencing token)
    write,     ///< exclusive side of the same lock, fencing token; see dlock/rw_mutex.hpp
    // Kinds of other backends (Redis answers them with errc::unsupported):
    shedlock,  ///< PostgreSQL: a row of ShedLock's `shedlock` table (database time, no token)
    lease,     ///< PostgreSQL: a row of dlock's `dlock_lease` table (token, NOTIFY wake-up)
    versioned, ///< PostgreSQL: a version-column lease row (cirello.io/pglock's table), no clock
    semaphore, ///< acquire_options::permits leases: Redis (Redisson RPermitExpirableSemaphore),
               ///< ZooKeeper (Curator InterProcessSemaphoreV2), PostgreSQL (a row per permit
               ///< in dlock's `dlock_semaphore`), etcd
};

///@{
/// The kinds by name, from the library's one table of kinds (src/core/kinds.cpp): the names
/// the CLI's --kind, `dlock status` and the man page use ("lock" for reentrant, "simple",
/// "fair", "read", "write", "shedlock", "lease", "versioned", "semaphore").
std::string_view kind_name(lock_kind kind) noexcept;
std::optional<lock_kind> kind_from_name(std::string_view name) noexcept;
/// Every kind, in the table's order.
std::vector<lock_kind> all_kinds();
/// The backends ("redis", "redlock", "zookeeper", "postgresql") that offer `kind`, for messages.
std::string_view backends_offering(lock_kind kind) noexcept;
///@}

/// A fixed lease: the lock expires after it and is not renewed (the watchdog is not used).
/// A type of its own so that `m.lock(fixed_lease{10s})` and `try_lock_for(2s,
/// fixed_lease{10s})` cannot be read as, or swapped with, a wait.
struct fixed_lease {
    /// A lease of `d` (>= 1 ms; shorter is errc::invalid_argument when used).
    explicit constexpr fixed_lease(std::chrono::milliseconds d) noexcept
        : duration(d) {}
    std::chrono::milliseconds duration; ///< >= 1 ms
};

/// Polling instead of waiting for the unlock message, for users who want it: `attempts` tries
/// in total, sleeping `delay` plus a uniform random jitter in [0, jitter] between them.
/// Waiting by notification (the default, when acquire_options::retry is empty) is faster and
/// cheaper.
struct retry_policy {
    unsigned attempts = 3;                ///< total tries including the first; >= 1
    std::chrono::milliseconds delay{50};  ///< pause between tries
    std::chrono::milliseconds jitter{50}; ///< extra random pause, uniform in [0, jitter]
};

/// What one acquisition asks for (client::acquire(), acquire_all(), redlock::acquire_with_votes());
/// set with designated initialisers: `{.wait = 5s, .lease = 30s}`.
struct acquire_options {
    /// How long to wait for the lock. nullopt (default) waits forever; zero tries once.
    /// Negative durations are treated as zero.
    std::optional<std::chrono::milliseconds> wait{};
    /// Fixed lease: the lock expires after it, no renewal. nullopt (default) uses the client's
    /// watchdog lease and renews it every lease / 3 while the handle lives. Must be >= 1 ms.
    std::optional<std::chrono::milliseconds> lease{};
    /// Which lock to take (default lock_kind::reentrant).
    lock_kind kind = lock_kind::reentrant;
    /// nullopt (default): wait for the unlock message. Set: poll as the policy says, still
    /// bounded by `wait`. Errors: attempts == 0 or negative durations are invalid_argument.
    std::optional<retry_policy> retry{};
    /// lock_kind::semaphore only: how many holders the semaphore admits at once (>= 1). Every
    /// client of one semaphore must pass the same number, as with Curator.
    unsigned permits = 1;
    /// The warning stage (lease::warning_token()): how much validity is left when a lease
    /// that is not being renewed warns. nullopt (default): a third of the lease. Zero warns
    /// only at the loss. Negative is errc::invalid_argument.
    std::optional<std::chrono::milliseconds> warn_margin{};
    /// The longest this hold may last, from the grant (when the acquisition returns). After
    /// it dlock stops renewing, marks the lease lost with loss_cause::max_hold (stop_token(),
    /// on_lost(), valid_until() in the past) and releases the lock on the server,
    /// best-effort. valid_until() never exceeds grant + max_hold, so the warning stage warns
    /// warn_margin before it. nullopt (default): no limit. Zero or negative is
    /// errc::invalid_argument.
    std::optional<std::chrono::milliseconds> max_hold{};
};

} // namespace dlock
