// detail::node: what a client has on one Redis server: the auto-pipelined command connection,
// the optional sync lane (blocking callers' own round trips) and the pub/sub subscriber.
// Every lock command goes to a node chosen by the router; holds remember their node.
//
// Thread safety: conn(), lane() and the run() of redis_client from any thread; subscriber() on
// the I/O thread only.
#pragma once

#include "redis/net/connection.hpp"
#include "redis/net/sync_lane.hpp"
#include "redis/pubsub/subscriber.hpp"

#include <memory>

namespace dlock::detail {

/// The lock-delay after a master change: client_options::failover_lock_delay, by default the
/// watchdog lease (ARCHITECTURE.md, "Nodes, the router and the topologies").
inline std::chrono::milliseconds lock_delay(const client_options& o) noexcept {
    return o.failover_lock_delay ? *o.failover_lock_delay : o.watchdog_lease;
}

class node {
public:
    /// `source`: where the master is when `where` is not fixed (Sentinel: the sentinel_source;
    /// Cluster: the master of one shard); null otherwise. Cluster nodes have no sync lane (a
    /// MOVED reply is followed on the I/O thread).
    node(asio::io_context& io, const client_options& opts, net::target where, pubsub::mode m,
         std::shared_ptr<net::target_source> source = nullptr);
    ~node();
    node(const node&) = delete;
    node& operator=(const node&) = delete;

    void start();
    /// Stops the lane and the command connection (any thread); stop_subscriber() runs on the
    /// I/O thread.
    void stop();
    void stop_subscriber();

    net::connection& conn() noexcept { return *conn_; }
    /// The sync lane, or null (blocking_io::io_thread, TLS).
    net::sync_lane* lane() noexcept { return lane_.get(); }
    pubsub::subscriber& subscriber() noexcept { return sub_; }
    pubsub::mode pubsub_mode() const noexcept { return sub_.pubsub_mode(); }
    /// Adds the wire counters of the command and pub/sub connections to `s`. Any thread.
    void add_counters(metrics_snapshot& s) const noexcept {
        conn_->counters().add_to(s);
        sub_.counters().add_to(s);
    }

    /// The node follows a master that can move (Sentinel, Cluster shard): topology errors and
    /// refused connections are retried within the caller's wait instead of reported.
    bool follows_master() const noexcept { return source_ != nullptr; }
    /// Until when new acquisitions on this node wait (lock-delay after a master change).
    /// Any thread.
    std::chrono::steady_clock::time_point paused_until() const noexcept {
        return std::chrono::steady_clock::time_point(
            std::chrono::steady_clock::duration(paused_until_.load(std::memory_order_acquire)));
    }
    /// I/O thread: the master moved. Every connection of the node follows it, and new
    /// acquisitions wait until `now + lock_delay` (client_options::failover_lock_delay).
    void master_changed(std::chrono::milliseconds lock_delay);
    /// I/O thread: every connection follows the master the source names now.
    void retarget();

private:
    std::shared_ptr<net::target_source> source_;
    std::shared_ptr<net::connection> conn_;
    std::unique_ptr<net::sync_lane> lane_; // null: blocking_io::io_thread or TLS
    pubsub::subscriber sub_;
    std::atomic<std::chrono::steady_clock::rep> paused_until_{0};
};

} // namespace dlock::detail
