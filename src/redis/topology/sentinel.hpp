// detail::sentinel_source: where the master of a Sentinel deployment is, for the connections
// of its node (net::target_source).
//
// - resolve(): the cached master, or a round that asks every sentinel in parallel
//   (SENTINEL GET-MASTER-ADDR-BY-NAME) and takes the first answer; the connection then checks
//   ROLE in its handshake, and a server that is not the master is invalidate()d and asked for
//   again after the connection's backoff.
// - +switch-master: one pub/sub connection per sentinel listens for the master's move and
//   re-points the node at once (on_change), instead of waiting for READONLY or a refused
//   connect.
// - A change of the master this source names (not its first answer) calls on_change: the
//   router re-points its node and starts the lock-delay there (node::master_changed).
//
// Thread safety: changes() from any thread; everything else on the I/O thread (start() and
// stop() post there).
#pragma once

#include "redis/net/connection.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace dlock::detail {

class sentinel_source final : public net::target_source,
                              public std::enable_shared_from_this<sentinel_source> {
public:
    using clock = std::chrono::steady_clock;

    sentinel_source(asio::io_context& io, const client_options& opts);
    ~sentinel_source() override;

    void start();
    void stop();

    void resolve(resolved done) override;
    void invalidate(const net::target& t) override;

    /// Runs on the I/O thread after the master changed (connections should follow).
    void on_change(std::function<void(const net::target&)> f) { on_change_ = std::move(f); }
    /// How many times the master changed since the client started.
    std::uint64_t changes() const noexcept { return changes_.load(std::memory_order_relaxed); }

private:
    struct query;
    void ask();
    void answered(std::uint64_t round, std::error_code ec, const resp3::value& v);
    void learned(const net::target& t, bool from_switch);
    void on_switch_message(const resp3::value& v);

    asio::io_context& io_;
    client_options opts_;                                  // of the data nodes
    std::vector<std::shared_ptr<net::connection>> ask_;    // one command connection per sentinel
    std::vector<std::shared_ptr<net::connection>> listen_; // one +switch-master listener each
    std::optional<net::target> master_;                    // what resolve() answers without asking
    std::optional<net::target> last_; // the last master learned (change detection)
    std::vector<resolved> waiting_;   // resolve() callers of the round in progress
    std::size_t outstanding_ = 0;     // answers the round still expects
    std::uint64_t round_ = 0;         // late answers of an earlier round are ignored
    std::error_code round_error_;
    std::function<void(const net::target&)> on_change_;
    std::atomic<std::uint64_t> changes_{0};
};

} // namespace dlock::detail
