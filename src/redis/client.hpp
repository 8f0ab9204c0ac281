// detail::redis_client: what a dlock::client owns, and nothing else: the options and id, the
// runtime (core/runtime.hpp: one io_context run by one I/O thread), the router over the nodes of
// the topology, the renewal service (one watchdog however many nodes) and the hold registry.
// Acquisition, release and renewal live in acquire.cpp (+ acquire_op.cpp), release.cpp and
// renewal.cpp.
#pragma once

#include "access.hpp"
#include "core/completion_flag.hpp"
#include "core/metrics.hpp"
#include "core/runtime.hpp"
#include "redis/hold_registry.hpp"
#include "redis/locks/protocol.hpp"
#include "redis/topology/router.hpp"

#include <dlock/client.hpp>

#include <atomic>
#include <memory>

namespace dlock::detail {

class renewal_service;
class redis_hold;
class hold;
class lock_backend;

/// Process-wide unique owner ids: one per thread (thread-bound locks) and one per lease handle.
std::uint64_t this_thread_owner_id() noexcept;
std::uint64_t new_owner_id() noexcept;

class redis_client : public std::enable_shared_from_this<redis_client> {
public:
    explicit redis_client(client_options opts);
    ~redis_client();
    void start();
    void shutdown();

    const client_options& options() const noexcept { return opts_; }
    const std::string& id() const noexcept { return id_; }
    asio::io_context& io() noexcept { return rt_.io(); }
    runtime& rt() noexcept { return rt_; }
    detail::router& router() noexcept { return router_; }
    renewal_service& renewal() noexcept { return *renewal_; }
    hold_registry& registry() noexcept { return registry_; }
    bool on_io_thread() const noexcept { return rt_.on_io_thread(); }
    bool shut_down() const noexcept { return shut_.load(std::memory_order_acquire); }

    /// The client's counters (core/metrics.hpp); any thread, relaxed atomics.
    client_metrics& metrics() noexcept { return metrics_; }
    /// Counters plus every connection's wire counters, as client::metrics() returns them.
    metrics_snapshot metrics_snapshot_now() const;
    /// Called by the topology code when the client follows a new master (Sentinel failover):
    /// counts it and tells the log sink (warning "topology changed", field `address`).
    void note_topology_change(std::string_view new_address = {});

    /// The sync lane of `n` when a first acquisition attempt may use it now (see
    /// sync_lane.hpp: not while an acquisition of this client waits, which it must not pass).
    net::sync_lane* lane_for(node& n) noexcept {
        return registry_.has_waiters() ? nullptr : n.lane();
    }
    /// Runs a command on `n` synchronously (the sync lane when it takes the call, even while
    /// acquisitions of this client wait; else the shared connection). Errors:
    /// errc::invalid_argument when called on the I/O thread.
    resp3::value run(node& n, std::span<const std::string_view> args, std::error_code& ec,
                     std::string_view eval_fallback = {}, bool lane_past_waiters = true);
    resp3::value run(node& n, const command& c, std::error_code& ec) {
        return run(n, c.args(), ec, c.eval_fallback());
    }
    /// A release: the sync lane only while no acquisition of this client waits. On the lane
    /// the answer goes to the releasing caller alone, who may lock again before the unlock
    /// message wakes the client's waiters (scenario C, write lock, one client: 99 % of the
    /// grants went to the thread that had just released, one worker got 1 % of its share); on
    /// the shared connection the I/O thread sees the answer first and gives them their head
    /// start (docs/design/redis-locks.md, "Polite release").
    resp3::value run_release(node& n, const command& c, std::error_code& ec) {
        return run(n, c.args(), ec, c.eval_fallback(), false);
    }

private:
    /// With a log sink: asks CONFIG GET maxmemory-policy once, after the first connect.
    void check_eviction_policy();

    std::atomic<bool> shut_{false};
    client_metrics metrics_;
    client_options opts_;
    std::string id_;
    runtime rt_; // before the router and renewal, whose timers and sockets are on its loop
    hold_registry registry_;
    detail::router router_;
    std::unique_ptr<renewal_service> renewal_;
};

/// Counts and logs the loss of `h` (redis_hold::end_lost): `cause` when known, otherwise
/// after a follow-up query of whether the lock still exists (gone or taken).
void report_loss(redis_client& c, std::shared_ptr<const redis_hold> h,
                 std::optional<loss_cause> cause);

/// The blocking bridge: a request on the caller's stack, completed on the I/O thread.
class sync_request final : public request {
public:
    void complete(std::error_code ec, resp3::value&& reply) override {
        ec_ = ec;
        reply_ = std::move(reply);
        done_.set();
    }
    void wait() noexcept { done_.wait(); }
    std::error_code ec_;
    resp3::value reply_;

private:
    completion_flag done_;
};

} // namespace dlock::detail
