// detail::cluster: the Redis Cluster part of the router (redis-cluster:// URLs).
//
// - The slot map: loaded from any reachable seed or known node (`CLUSTER SHARDS`, falling back
//   to `CLUSTER SLOTS` on servers without it) through one map-loading connection that rotates
//   over the seeds and the masters it learned. One `node` per shard (a master and its
//   replicas): a node is matched across refreshes by the node ids of its members, so a failover
//   inside a shard keeps the node and only moves its connections (the shard's
//   `shard_source` names the new master; ROLE is checked in the handshake, as for Sentinel).
//   Nodes are never destroyed before the client (holds keep their `node*`).
// - for_slot(): one atomic pointer per slot (16384), any thread. Before the first map has
//   arrived (or for a slot no shard serves) the first node is answered and MOVED corrects it.
// - Redirections, above the connections: every node's command connection hands MOVED / ASK /
//   CLUSTERDOWN / TRYAGAIN replies to redirect(), which re-dispatches the request
//   (detail::request::redirects bounds it at max_redirects, then the caller sees the reply,
//   errc::moved or errc::server_busy):
//   MOVED updates that slot at once, asks for a refresh of the whole map and re-sends to the
//   node of the named address; ASK sends `ASKING` + the command to the named node (and, for an
//   EVALSHA, `SCRIPT LOAD` first, so that the command is not refused with NOSCRIPT there and
//   then re-sent without ASKING); CLUSTERDOWN / TRYAGAIN refresh the map and re-send to the
//   slot's node after a short pause while the request's deadline allows.
// - A lost connection to a master (refused connect, dropped socket) invalidates its shard's
//   master: the next connect waits for a refreshed map.
//
// Thread safety: for_slot(), first(), for_each_node() from any thread; everything else on the
// I/O thread (start() and stop() post there or are safe from any thread as documented).
#pragma once

#include "redis/topology/node.hpp"

#include <asio/steady_timer.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dlock::detail {

/// One shard of a slot map: the slot ranges its master serves, the master's address and the
/// node ids of its members (master first). Pure data, filled by the parsers below.
struct cluster_shard {
    std::vector<std::pair<std::uint16_t, std::uint16_t>> ranges; // inclusive
    net::target master;
    std::vector<std::string> ids;
};

/// Parses a `CLUSTER SHARDS` reply (Redis 7). Shards without a master that is online are left
/// out. `tls`: the master's address uses its `tls-port` (when the reply has one). nullopt when
/// the reply is not a shard list.
std::optional<std::vector<cluster_shard>> parse_cluster_shards(const resp3::value& v,
                                                               bool tls = false);
/// Parses a `CLUSTER SLOTS` reply (one entry per slot range; ranges of one master merged into
/// one shard).
std::optional<std::vector<cluster_shard>> parse_cluster_slots(const resp3::value& v);
/// Parses "MOVED 3999 127.0.0.1:6381" / "ASK ...": the slot and the address.
bool parse_redirect(std::string_view error, bool& ask, std::uint16_t& slot, net::target& to);

class cluster : public std::enable_shared_from_this<cluster> {
public:
    static constexpr std::uint8_t max_redirects = 5;

    cluster(asio::io_context& io, const client_options& opts);
    ~cluster();
    cluster(const cluster&) = delete;
    cluster& operator=(const cluster&) = delete;

    /// Starts the map-loading connection and the first refresh (call once).
    void start();
    /// Blocks until the first map was loaded or `deadline` passed (not on the I/O thread).
    bool wait_ready(std::chrono::steady_clock::time_point deadline);
    /// Stops every node and the map-loading connection. Any thread.
    void stop();
    void stop_subscribers(); // I/O thread

    node& for_slot(std::uint16_t slot) noexcept;
    node& first() noexcept { return *first_; }
    /// Calls `f` for every node (every shard seen since the client started).
    void for_each_node(const std::function<void(node&)>& f);
    /// One node per master address the last map named (status / list scans).
    std::vector<node*> masters();
    /// Map refreshes completed (tests, statistics).
    std::uint64_t refreshes() const noexcept { return refreshes_.load(std::memory_order_relaxed); }

    /// Runs on the I/O thread after a shard's master changed (a failover inside the cluster),
    /// with the new master's "host:port". Set before start().
    void on_master_change(std::function<void(const std::string&)> f) { on_change_ = std::move(f); }

    /// At most one map load starts per this gap: while a master is down, every failed
    /// reconnect asks for a refresh, and the map then names the dead master until the cluster
    /// fails over (without the gap, a load per reconnect attempt of every node).
    static constexpr std::chrono::milliseconds min_refresh_gap{100};

    /// I/O thread: loads the map again (coalesced with one in flight, and started no sooner
    /// than min_refresh_gap after the last one ended); `done` after it.
    void refresh(std::function<void(bool ok)> done = {});

private:
    class shard_source;
    class seed_source;
    struct map_request;

    node& add_node(const net::target& master);         // I/O thread or constructor
    node* node_at(const net::target& master);          // I/O thread
    void apply(const std::vector<cluster_shard>& all); // shards without slots are skipped
    void map_answered(bool shards_cmd, std::error_code ec, const resp3::value& v);
    void finish_refresh(bool ok);
    bool redirect(node& from, request& r, const resp3::value& reply);
    bool retry_later(node& from, request& r);

    asio::io_context& io_;
    client_options opts_;
    std::shared_ptr<seed_source> seeds_;
    std::shared_ptr<net::connection> control_; // the map-loading connection
    std::unique_ptr<std::array<std::atomic<node*>, 16384>> slots_;

    std::mutex nodes_mu_; // guards the vectors below (appends on the I/O thread)
    std::vector<std::unique_ptr<node>> nodes_;
    std::vector<std::shared_ptr<shard_source>> sources_; // parallel to nodes_
    node* first_ = nullptr;
    bool control_started_ = false; // guarded by nodes_mu_: nodes made from now on start at once

    // I/O thread only.
    bool loading_ = false;
    bool gap_armed_ = false;                            // a load waits for gap_timer_
    std::chrono::steady_clock::time_point next_load_{}; // the last load's end + the gap
    asio::steady_timer gap_timer_;
    bool use_slots_ = false; // CLUSTER SHARDS is not known: use CLUSTER SLOTS
    std::vector<std::function<void(bool)>> refresh_waiting_;
    std::vector<std::shared_ptr<asio::steady_timer>> retry_timers_; // CLUSTERDOWN / TRYAGAIN
    std::atomic<bool> stopped_{false};
    std::function<void(const std::string&)> on_change_;
    std::atomic<std::uint64_t> refreshes_{0};

    std::mutex ready_mu_;
    std::condition_variable ready_cv_;
    bool ready_ = false; // guarded by ready_mu_
};

} // namespace dlock::detail
