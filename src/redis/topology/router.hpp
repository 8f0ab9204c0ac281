// detail::router: which node a lock's commands go to. A standalone server is one node; the
// other topologies plug in here (ARCHITECTURE.md, "Topologies"):
// - Sentinel: one node whose connections ask a sentinel_source where the master is before
//   each connect, check ROLE, follow +switch-master, and re-send what READONLY / LOADING /
//   MASTERDOWN refused (topology/sentinel.hpp, net::target_source);
// - Cluster: a slot map (CLUSTER SHARDS / SLOTS) picks the node by the lock's slot; MOVED and
//   ASK are re-dispatched above the connections; pub/sub is sharded (SSUBSCRIBE per node);
//   renewal batches never mix slots (batches_by_slot);
// - Redlock: a quorum over N independent nodes, all on the client's one I/O thread.
//
// Thread safety: for_slot() from any thread (standalone and Sentinel: the node set is fixed for
// the client's life; Cluster: nodes are added, never removed, see topology/cluster.hpp).
#pragma once

#include "redis/topology/node.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace dlock::detail {

class sentinel_source;

class cluster;

class router {
public:
    /// The topology of `opts`: one standalone server, a Sentinel's master, or a Cluster.
    router(asio::io_context& io, const client_options& opts);
    ~router();

    /// The node for commands that name no lock (raw dlock::redis::command() calls). On a Cluster
    /// the first seed's shard: a raw command with keys of another slot is MOVED there.
    node& any() noexcept;
    /// The node that serves `slot`.
    node& for_slot(std::uint16_t slot) noexcept;
    /// A script may touch keys of one slot only (Cluster: CROSSSLOT otherwise), so renewal
    /// batches are grouped by slot too. False on a standalone server, where one batch per
    /// node and kind carries up to 100 locks.
    bool batches_by_slot() const noexcept { return cluster_ != nullptr; }
    /// Every master's node (one on a standalone server or Sentinel; one per shard on a
    /// Cluster, as of the last slot map).
    std::vector<node*> masters();
    /// The Cluster part, or null.
    detail::cluster* cluster_map() const noexcept { return cluster_.get(); }

    void start();
    /// After start(), not on the I/O thread: a Cluster waits for its first slot map until
    /// `deadline` (commands sent before it arrive are MOVED to the right node).
    void wait_ready(std::chrono::steady_clock::time_point deadline);
    void stop();
    void stop_subscribers();
    /// Every node of a standalone server or Sentinel (metrics: their connections' wire
    /// counters; a Cluster's own nodes are the cluster_map()'s). Any thread.
    std::span<const std::unique_ptr<node>> nodes() const noexcept { return nodes_; }

    /// Sentinel: the master changed to "host:port" (I/O thread). Set before start().
    void on_master_change(std::function<void(const std::string&)> f) { on_change_ = std::move(f); }
    /// How many master changes this client saw (Sentinel; 0 otherwise).
    std::uint64_t master_changes() const noexcept;

private:
    std::shared_ptr<sentinel_source> sentinel_; // Sentinel only
    std::shared_ptr<detail::cluster> cluster_;  // Cluster only (owns its nodes)
    std::vector<std::unique_ptr<node>> nodes_;
    std::function<void(const std::string&)> on_change_;
    std::chrono::milliseconds lock_delay_{};
};

} // namespace dlock::detail
