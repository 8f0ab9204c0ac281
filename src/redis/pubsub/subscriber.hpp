// net::subscriber: one pub/sub connection shared by every waiter of a client.
//
// Channels are reference-counted by their waiters: the first waiter sends SUBSCRIBE; when the
// last one leaves, the subscription lingers for `linger` (100 ms) and is then dropped with
// UNSUBSCRIBE, so a waiter that gives up leaves no subscription behind for long, while a lock
// that is contended again at once (two threads taking turns) does not pay SUBSCRIBE,
// UNSUBSCRIBE and a second refused attempt on every turn.
// A waiter learns that its subscription is active (the server confirmed it) through
// on_active(), and only then makes its last acquire attempt: a release published after that
// attempt cannot be missed.
//
// Wake-up policy (Redisson's LockPubSub): message "0" wakes ONE sleeping waiter of the channel
// (no herd); "1" wakes all. A message that finds no sleeping waiter is kept as a permit, capped
// at the number of waiters, and consumed by the next waiter that goes to sleep (the message can
// overtake the reply of that waiter's attempt, which travels on another connection). After a
// reconnect every channel is resubscribed and every waiter is woken (messages may have been
// lost while down).
//
// Thread safety: every member function runs on the client's I/O thread.
#pragma once

#include "redis/net/connection.hpp"

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

namespace dlock::net {

class subscriber {
public:
    class waiter {
    public:
        virtual void on_active() = 0; ///< the channel subscription is confirmed
        virtual void on_wake() = 0;   ///< an unlock message (or reconnect) woke this waiter
    protected:
        ~waiter() = default;
    };

    /// How long a channel stays subscribed after its last waiter left.
    static constexpr std::chrono::milliseconds linger{100};

    subscriber(asio::io_context& io, const client_options& opts, target where,
               std::string subscribe_cmd = "SUBSCRIBE");
    ~subscriber();

    /// Registers `w` on `channel`; on_active() follows (posted if already active).
    void add(const std::string& channel, waiter* w);
    /// Unregisters `w`; UNSUBSCRIBE when it was the last one. Safe for unknown waiters.
    void remove(const std::string& channel, waiter* w);
    /// `w` is about to sleep. Returns true if a stored permit was consumed (retry now);
    /// otherwise `w` is marked sleeping and will get on_wake().
    bool sleep(const std::string& channel, waiter* w);
    /// `w` woke for another reason (timer): it is no longer sleeping.
    void awake(const std::string& channel, waiter* w);
    /// The longest-sleeping waiter of `channel` that `accept` takes, removed from the sleeping
    /// list (it stays registered); null if none, or if the subscription is not active.
    waiter* take_sleeping(const std::string& channel, const std::function<bool(waiter*)>& accept);

    /// True when `channel` has a confirmed subscription that was confirmed at or before `t`
    /// (steady clock of this process). A command sent after that confirmation was processed by
    /// the server after the SUBSCRIBE, so every release after it publishes to us.
    bool active_since(const std::string& channel, std::chrono::steady_clock::time_point t) const;

    /// Channels subscribed (or being subscribed), lingering ones included.
    std::size_t channel_count() const noexcept { return channels_.size(); }
    /// Waiters of `channel` asleep now (for tests and introspection).
    std::size_t sleeping_count(const std::string& channel) const {
        auto it = channels_.find(channel);
        return it == channels_.end() ? 0 : it->second.sleeping.size();
    }
    void stop();

private:
    struct entry {
        std::list<waiter*> waiters; // FIFO
        std::list<waiter*> sleeping;
        std::size_t permits = 0;
        bool active = false;
        std::chrono::steady_clock::time_point confirmed_at{}; // when `active` last became true
        std::chrono::steady_clock::time_point idle_since{};   // no waiters since (if none)
    };
    void sweep(); // drops channels that lingered long enough
    void arm_sweep();
    void on_push(const resp3::value& v);
    void on_state(bool connected);
    void send(std::string_view cmd, const std::string& channel);

    asio::io_context& io_;
    std::shared_ptr<connection> conn_;
    std::string subscribe_cmd_;
    std::string unsubscribe_cmd_;
    std::unordered_map<std::string, entry> channels_;
    asio::steady_timer sweep_timer_;
    bool sweep_armed_ = false;
    bool started_ = false;
};

} // namespace dlock::net
