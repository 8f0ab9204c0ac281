// dlock/metrics.hpp: what a client counts, as a plain snapshot with no dependencies.
//
// Every dlock::client counts its acquisitions, waits, holds, hand-offs, renewals, losses,
// releases, connections and commands with relaxed atomics (no mutex on the lock path), for its
// whole life; client::metrics() copies them into a metrics_snapshot. Counters only grow, so a
// rate is the difference of two snapshots. The optional component dlock::prometheus
// (dlock/prometheus.hpp) turns snapshots into Prometheus metric families at scrape time.
//
//   auto m = client.metrics();
//   std::uint64_t won = m.kind("reentrant").acquired;
//   double p_le_1ms = m.wait_time.fraction_at_most(0.001);
//
// What is measured (the clocks are the client's steady clock):
// - an acquisition is one call of lock(), try_lock*(), acquire(), their async twins, or one
//   member of acquire_all; a re-entry (the owner holds the lock already) is one too, with the
//   outcome `reentered`;
// - wait_time: from the call to the grant, of acquisitions that were granted (re-entries
//   included);
// - hold_time: from before the granting attempt was sent to the end of the hold (released or
//   lost), once per hold: a mutex's re-entries share their first acquisition's hold, a lease
//   handle is a hold of its own;
// - handoff_handover: a local hand-over, from the releasing side starting the hand-over script
//   to the waiter being granted (both in this process): the cost of passing a lock between two
//   threads of one client;
// - handoff_wake: from an unlock message (or a hand-over that published instead) reaching this
//   client's waiter to that waiter being granted. It does not include the path from the
//   releasing process to this client (that would compare two processes' clocks);
// - renewals: the watchdog's batches (one script per node, kind and up to 100 locks);
//   renewals_ok / renewals_failed count locks (a batch that failed fails all its locks; a lock
//   the server answered "not yours" for is a loss, not a failed renewal);
// - renewal_slack: per hold, the validity it had left (valid_until - now) when a renewal of it
//   succeeded: a Redis or Redlock watchdog renewal, a ZooKeeper session's answered ping, an
//   etcd keep-alive answer, a PostgreSQL session proof (advisory locks) or row extension;
// - warnings: leases whose warning stage warned (the warning before a loss; counted once per
//   lease; a lease nobody watches and without max_hold has no warning stage);
// - losses by cause; a hold ended by acquire_options::max_hold counts as loss_cause::max_hold
//   (and its release on the server, if it succeeds, in releases too);
// - ambiguous: commands written whose reply never came (connection died or timed out);
// - connects / reconnects: completed handshakes of the command and pub/sub connections (the
//   first of each connection, and every later one); on ZooKeeper the session's connections
//   (the first, then every reconnect of the C client); on etcd the lease's keep-alive streams
//   (the first to answer, then every later one: a member lost, the next one answering); on
//   PostgreSQL every session opened (each is a new connection: reconnects stay zero);
//   topology_changes: a new master after a
//   failover (Sentinel; zero on a standalone server).
// A Redlock client counts what its rounds do (dlock/redlock.hpp says which fields); one client's
// snapshot never includes another's.
//
// Build switch: configuring with -DDLOCK_METRICS=OFF compiles the counting out (every
// snapshot is then all zeros and `enabled` is false); for measuring what the counting costs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

/// A histogram: per-bucket counts for upper bounds `bounds` (inclusive, ascending), then one
/// bucket for everything above the last bound. Not cumulative.
struct histogram_snapshot {
    std::vector<double> bounds{};        ///< upper bounds, in the histogram's unit
    std::vector<std::uint64_t> counts{}; ///< bounds.size() + 1 entries; the last is "+Inf"
    double sum = 0;                      ///< sum of the observed values, in the unit
    std::uint64_t count = 0;             ///< number of observations (the sum of counts)

    /// The share of observations <= `bound` (rounded up to the next bucket bound); 0 when empty.
    double fraction_at_most(double bound) const noexcept;
};

/// Why an acquisition ended with an error (dlock::errc grouped for dashboards).
enum class error_class {
    unavailable, ///< errc::unavailable: the server could not be reached
    ambiguous,   ///< errc::ambiguous: written, reply never came (undone best-effort)
    cancelled,   ///< errc::cancelled: shut down or cancelled
    denied,      ///< errc::auth_failed, errc::permission_denied
    server,   ///< an error reply (OOM, BUSY, READONLY, MOVED, NOSCRIPT, ERR, ...), not_replicated
    protocol, ///< errc::protocol_error
    invalid,  ///< errc::invalid_argument, errc::configuration_error
    other,    ///< anything else
};
/// The number of error_class values (the size of kind_counts::errors).
inline constexpr std::size_t error_class_count = 8;
/// "unavailable", "ambiguous", "cancelled", "denied", "server", "protocol", "invalid", "other".
std::string_view to_string(error_class c) noexcept;

/// Why a held lock was lost.
enum class loss_cause {
    gone,         ///< the server said "not yours" and the lock's keys no longer exist
    taken,        ///< the server said "not yours" and the lock exists (held by another owner)
    deadline,     ///< no renewal succeeded before the lease ran out (server unreachable, slow)
    server_error, ///< as deadline, and the last renewal got an error reply (OOM, READONLY, ...)
    undetermined, ///< the server said "not yours"; the follow-up EXISTS check failed
    max_hold,     ///< acquire_options::max_hold passed: dlock ended the hold (and released it)
};
/// The number of loss_cause values (the size of metrics_snapshot::losses).
inline constexpr std::size_t loss_cause_count = 6;
/// "gone", "taken", "deadline", "server_error", "undetermined", "max_hold".
std::string_view to_string(loss_cause c) noexcept;

/// Acquisitions of one lock kind.
struct kind_counts {
    std::string kind{};             ///< "reentrant", "simple", "fair", "read", "write", "custom"
    std::uint64_t acquired = 0;     ///< granted to a new owner
    std::uint64_t reentered = 0;    ///< granted by re-entering a hold of the same owner
    std::uint64_t not_acquired = 0; ///< the wait ended without the lock (no error)
    std::array<std::uint64_t, error_class_count> errors{}; ///< by error_class
};

/// A copy of a client's counters at one moment; client::metrics().
struct metrics_snapshot {
    /// False when the library was built with DLOCK_METRICS=OFF (all counters are zero).
    bool enabled = true;
    /// One entry per lock kind, in dlock::lock_kind order, then "custom" (registered kinds).
    std::vector<kind_counts> acquisitions{};
    histogram_snapshot wait_time{};          ///< seconds
    histogram_snapshot hold_time{};          ///< seconds
    histogram_snapshot handoff_handover{};   ///< seconds
    histogram_snapshot handoff_wake{};       ///< seconds
    std::uint64_t renewal_batches = 0;       ///< watchdog renewal scripts sent
    std::uint64_t renewals_ok = 0;           ///< locks a batch renewed
    std::uint64_t renewals_failed = 0;       ///< locks of batches that failed (error, no reply)
    histogram_snapshot renewal_batch_size{}; ///< locks per batch
    std::array<std::uint64_t, loss_cause_count> losses{}; ///< by loss_cause
    /// Leases whose warning came (lease::warning_token(); only watched leases and leases with
    /// a max_hold warn), once per lease.
    std::uint64_t warnings = 0;
    /// Seconds of validity a hold had left when a renewal of it succeeded (how close to the
    /// deadline renewals land; a healthy watchdog renews with about two thirds left).
    histogram_snapshot renewal_slack{};
    std::uint64_t releases = 0;           ///< final releases the server confirmed
    std::uint64_t releases_not_owner = 0; ///< releases answered "not yours" (also a loss)
    std::uint64_t releases_failed = 0;    ///< releases with a transport or server error
    std::uint64_t ambiguous = 0;          ///< commands written whose outcome is unknown
    std::uint64_t connects = 0;           ///< first handshakes of connections
    std::uint64_t reconnects = 0;         ///< later handshakes of the same connections
    std::uint64_t topology_changes = 0;   ///< new masters followed (Sentinel failover)
    /// Commands sent on every connection: lock scripts, dlock::redis::command(), SUBSCRIBE and
    /// friends, health-check PINGs, a NOSCRIPT's EVAL re-send; not the handshakes.
    std::uint64_t commands = 0;
    std::uint64_t scripts = 0;            ///< EVALSHA / EVAL sent
    std::uint64_t noscript_fallbacks = 0; ///< EVALSHA answered NOSCRIPT and re-sent as EVAL
    /// Server-side watches the server cancelled (etcd: a compaction past the revision the
    /// watch starts from, or another cancel); each was read again and watched anew. Zero on
    /// backends whose watches the server does not cancel.
    std::uint64_t watches_cancelled = 0;
    /// Watch streams that ended or went silent (etcd: a member gone, its leader lost); every
    /// watch on one was read again and watched anew on a new stream.
    std::uint64_t watch_streams_broken = 0;

    /// The counts of `kind` (an empty entry with that name when there is none).
    kind_counts kind(std::string_view name) const;
    /// Sum of losses over every cause.
    std::uint64_t losses_total() const noexcept;
};

} // namespace dlock
