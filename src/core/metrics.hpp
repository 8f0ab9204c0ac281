// core::client_metrics: the counters behind dlock::metrics_snapshot (dlock/metrics.hpp), and
// the wire counters every connection keeps. No sockets, no mutex: relaxed atomics only, so the
// lock path pays a few uncontended-or-not increments and no lock. Groups written by different
// paths (acquisitions, holds, renewals, wire) sit on cache lines of their own so that one
// path's increments do not invalidate another's line.
//
// Histograms are fixed arrays of log2-spaced buckets (bucket i: value <= 2^i units, one
// overflow bucket): recording is a bit_width and two relaxed increments, no search.
//
// DLOCK_METRICS_ENABLED (CMake option DLOCK_METRICS, default ON) = 0 compiles every recording
// function to nothing; snapshots are then all zeros with `enabled == false`.
#pragma once

#include "core/kinds.hpp"

#include <dlock/log.hpp>
#include <dlock/metrics.hpp>

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>

#ifndef DLOCK_METRICS_ENABLED
#define DLOCK_METRICS_ENABLED 1
#endif

namespace dlock::detail {

inline constexpr bool metrics_enabled = DLOCK_METRICS_ENABLED != 0;
inline constexpr std::size_t cache_line = 64;

/// Fixed log2 buckets: bucket i (< Bounds) holds values <= 2^i, bucket Bounds the rest.
template <std::size_t Bounds>
class log2_histogram {
public:
    static constexpr std::size_t buckets = Bounds + 1;

    static constexpr std::size_t index(std::uint64_t v) noexcept {
        if (v <= 1) return 0;
        const auto i = static_cast<std::size_t>(std::bit_width(v - 1));
        return i < Bounds ? i : Bounds;
    }
    void record(std::uint64_t v) noexcept {
        counts_[index(v)].fetch_add(1, std::memory_order_relaxed);
        sum_.fetch_add(v, std::memory_order_relaxed);
    }
    /// Bounds are 2^i * unit; the sum is scaled by unit too.
    histogram_snapshot snapshot(double unit) const {
        histogram_snapshot s;
        s.bounds.reserve(Bounds);
        for (std::size_t i = 0; i < Bounds; ++i)
            s.bounds.push_back(static_cast<double>(std::uint64_t{1} << i) * unit);
        s.counts.reserve(buckets);
        for (const auto& c : counts_) {
            s.counts.push_back(c.load(std::memory_order_relaxed));
            s.count += s.counts.back();
        }
        s.sum = static_cast<double>(sum_.load(std::memory_order_relaxed)) * unit;
        return s;
    }

private:
    std::array<std::atomic<std::uint64_t>, buckets> counts_{};
    std::atomic<std::uint64_t> sum_{0};
};

/// Durations in whole microseconds (rounded up), 1 us .. 2^25 us (33.6 s), then overflow.
class duration_histogram {
public:
    void record(std::chrono::nanoseconds d) noexcept {
        const auto ns = d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
        h_.record((ns + 999) / 1000);
    }
    histogram_snapshot snapshot() const { return h_.snapshot(1e-6); }

private:
    log2_histogram<26> h_;
};

/// errc grouped for dashboards (dlock::error_class).
error_class classify(std::error_code ec) noexcept;

/// Per connection (command or pub/sub); the sync lane counts into its node's command
/// connection. Written by submitting threads and the I/O thread.
struct alignas(cache_line) wire_counters {
    std::atomic<std::uint64_t> commands{0};
    std::atomic<std::uint64_t> scripts{0};
    std::atomic<std::uint64_t> noscript{0};
    std::atomic<std::uint64_t> ambiguous{0};
    std::atomic<std::uint64_t> connects{0};
    std::atomic<std::uint64_t> reconnects{0};

    static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
        if constexpr (metrics_enabled) c.fetch_add(n, std::memory_order_relaxed);
    }
    /// One command written (EVALSHA / EVAL count as scripts too).
    void sent(std::string_view name) noexcept {
        if constexpr (!metrics_enabled) return;
        commands.fetch_add(1, std::memory_order_relaxed);
        if (name.size() >= 4 && (name[0] == 'E' || name[0] == 'e') &&
            (name[1] == 'V' || name[1] == 'v'))
            scripts.fetch_add(1, std::memory_order_relaxed); // EVAL, EVALSHA, EVAL_RO, ...
    }
    void add_to(metrics_snapshot& s) const noexcept;
};

/// One client's counters, and the log sink its events go to (the one object every backend has
/// one of and every hold reaches, hold::with_metrics(): so a loss is counted and logged on one
/// path for every backend, docs/design/metrics-and-logging.md "One log path").
class client_metrics {
public:
    using clock = std::chrono::steady_clock;
    /// `log`: the client's sink (client_options::log, or client(url, log_options)); set once.
    explicit client_metrics(log_options log = {})
        : log_(std::move(log)) {}
    /// The client's log sink (core/log.hpp builds records for it).
    const log_options& log() const noexcept { return log_; }
    /// A slot per kind of the kinds table (core/kinds.hpp: detail::metrics_slot), then one for
    /// every kind a backend registers itself (custom).
    static constexpr std::size_t kinds = kind_count + 1;

    /// One acquisition ended: granted (`acquired`, maybe by re-entry), not granted within the
    /// wait (`!acquired`, no error) or failed (`ec`). `kind` is the kind's slot (metrics_slot).
    void acquisition(std::size_t kind, std::error_code ec, bool acquired, bool reentered,
                     clock::duration waited) noexcept;
    void hold_ended(clock::duration held) noexcept {
        if constexpr (metrics_enabled) holds_.hold_time.record(held);
    }
    void handoff_handover(clock::duration d) noexcept {
        if constexpr (metrics_enabled) holds_.handover.record(d);
    }
    void handoff_wake(clock::duration d) noexcept {
        if constexpr (metrics_enabled) holds_.wake.record(d);
    }
    /// A renewal batch of `locks` locks was sent.
    void renewal_batch(std::size_t locks) noexcept;
    void renewals(std::uint64_t ok, std::uint64_t failed) noexcept;
    void loss(loss_cause c) noexcept {
        if constexpr (metrics_enabled)
            renewals_.losses[static_cast<std::size_t>(c)].fetch_add(1, std::memory_order_relaxed);
    }
    /// A lease's warning came (once per lease).
    void warning() noexcept {
        if constexpr (metrics_enabled) renewals_.warnings.fetch_add(1, std::memory_order_relaxed);
    }
    /// A renewal of a hold succeeded while the hold was valid until `until` (before the
    /// renewal moved it): the slack is until - now (zero when past).
    void renewal_slack(clock::time_point until) noexcept {
        if constexpr (metrics_enabled) renewals_.slack.record(until - clock::now());
    }
    enum class release_result { released, not_owner, failed };
    void release(release_result r) noexcept;
    /// A connection (or session, channel) of a backend without per-connection wire counters
    /// completed its handshake: its first (`again` false) or a later one.
    void connected(bool again) noexcept {
        if constexpr (metrics_enabled)
            (again ? renewals_.reconnects : renewals_.connects)
                .fetch_add(1, std::memory_order_relaxed);
    }
    void topology_change() noexcept {
        if constexpr (metrics_enabled)
            renewals_.topology_changes.fetch_add(1, std::memory_order_relaxed);
    }

    /// Everything but the wire counters (the caller adds those of its connections).
    metrics_snapshot snapshot() const;

private:
    struct alignas(cache_line) kind_slot {
        std::atomic<std::uint64_t> acquired{0};
        std::atomic<std::uint64_t> reentered{0};
        std::atomic<std::uint64_t> not_acquired{0};
        std::array<std::atomic<std::uint64_t>, error_class_count> errors{};
    };
    struct alignas(cache_line) wait_group {
        duration_histogram wait_time;
    };
    struct alignas(cache_line) hold_group {
        duration_histogram hold_time;
        duration_histogram handover;
        duration_histogram wake;
        std::atomic<std::uint64_t> releases{0};
        std::atomic<std::uint64_t> releases_not_owner{0};
        std::atomic<std::uint64_t> releases_failed{0};
    };
    struct alignas(cache_line) renewal_group {
        std::atomic<std::uint64_t> batches{0};
        std::atomic<std::uint64_t> ok{0};
        std::atomic<std::uint64_t> failed{0};
        log2_histogram<8> batch_size; // 1 .. 128 locks (batches carry at most 100)
        std::array<std::atomic<std::uint64_t>, loss_cause_count> losses{};
        std::atomic<std::uint64_t> topology_changes{0};
        std::atomic<std::uint64_t> connects{0};   // connected(false)
        std::atomic<std::uint64_t> reconnects{0}; // connected(true)
        std::atomic<std::uint64_t> warnings{0};
        duration_histogram slack;
    };

    std::array<kind_slot, kinds> kinds_{};
    wait_group wait_{};
    hold_group holds_{};
    renewal_group renewals_{};
    log_options log_;
};

} // namespace dlock::detail
