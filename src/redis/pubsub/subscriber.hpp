// pubsub::subscriber: drives the pub/sub connection of one node with a channel_table (the
// pure part: reference counts, linger, confirmation, permits, wake rules; see
// channel_table.hpp). This class only turns the table's answers into SUBSCRIBE/UNSUBSCRIBE,
// calls the waiters it names, runs the linger sweep timer and resubscribes after a reconnect.
// An error reply to a SUBSCRIBE (a Cluster's MOVED, ASK, CLUSTERDOWN or TRYAGAIN to an
// SSUBSCRIBE during a migration or failover; NOPERM) sends the waiters of every unconfirmed
// channel back to join again (waiter::on_dropped) after a pause: 50 ms for a Cluster's
// redirection, 1 s otherwise. Without it they would wait for a confirmation until their deadline.
//
// Thread safety: every member function runs on the client's I/O thread.
#pragma once

#include "redis/net/connection.hpp"
#include "redis/pubsub/channel_table.hpp"
#include "redis/pubsub/waiter.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dlock::pubsub {

class subscriber {
public:
    using table = channel_table<waiter>;

    subscriber(asio::io_context& io, const client_options& opts, net::target where, mode m,
               std::shared_ptr<net::target_source> source = nullptr);
    ~subscriber();

    /// Registers `w` on `channel` with the kind's wake rule; on_active() follows (posted when
    /// the channel is active already).
    void add(const std::string& channel, waiter* w, wake_rule rule);
    /// Unregisters `w`; the channel lingers, then goes. Safe for unknown waiters.
    void remove(const std::string& channel, waiter* w);
    /// See channel_table::sleep / awake / take_sleeping / active_since.
    bool sleep(const std::string& channel, waiter* w,
               std::chrono::steady_clock::time_point attempt_sent_at) {
        return table_.sleep(channel, w, attempt_sent_at);
    }
    void awake(const std::string& channel, waiter* w) { table_.awake(channel, w); }
    waiter* take_sleeping(const std::string& channel,
                          const std::function<bool(const waiter&)>& accept) {
        return table_.take_sleeping(channel, accept);
    }
    bool active_since(const std::string& channel, std::chrono::steady_clock::time_point t) const {
        return table_.active_since(channel, t);
    }
    std::size_t sleeping_count(const std::string& channel) const {
        return table_.sleeping_count(channel);
    }
    mode pubsub_mode() const noexcept { return mode_; }
    /// The pub/sub connection's wire counters (any thread: conn_ is set for good at
    /// construction).
    const detail::wire_counters& counters() const noexcept { return conn_->counters(); }
    void stop();
    /// The master moved: resubscribe there (net::connection::retarget).
    void retarget() { conn_->retarget(); }

private:
    void arm_sweep();
    void on_push(const resp3::value& v);
    void on_refused(const resp3::value& error);
    void on_state(bool connected);
    void send(std::string_view cmd, const std::string& channel);

    asio::io_context& io_;
    std::shared_ptr<net::connection> conn_;
    mode mode_;
    table table_;
    asio::steady_timer sweep_timer_;
    bool sweep_armed_ = false;
    asio::steady_timer rejoin_timer_;
    std::vector<std::shared_ptr<waiter>> rejoin_; // refused, to join again when the timer fires
    bool started_ = false;
    std::vector<waiter*> notify_, wake_; // scratch, reused
    std::vector<std::string> gone_;      // scratch, reused
};

} // namespace dlock::pubsub
