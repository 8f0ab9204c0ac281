// pubsub::channel_table: which channels a client listens on and who waits on each, without
// I/O. The subscriber (subscriber.hpp) drives a connection with what it returns; the unit
// tests (tests/unit/redis/pubsub/redis_pubsub_channel_table_test.cpp) drive it by hand.
//
// - Reference counts: the first waiter of a channel asks for SUBSCRIBE; when the last one
//   leaves, the channel lingers (`linger`) and sweep() then asks for UNSUBSCRIBE, so a lock
//   contended again at once does not pay SUBSCRIBE, UNSUBSCRIBE and a refused attempt per turn.
// - Confirmation: a channel is active once the server confirmed it; confirmed_at tells whether
//   a command sent at time t was processed after the SUBSCRIBE (active_since).
// - Wake-up: the wake rule given with a channel's waiters (the lock kind's, see
//   locks/protocol.hpp) says whether a message wakes one sleeping waiter (no herd), all, or
//   none. A message that finds no sleeper is kept as a permit, capped at the number of
//   waiters, and consumed by the next waiter that goes to sleep (the message can overtake the
//   reply of that waiter's attempt, which travels on another connection). A message on a
//   lingering channel (no waiter at all) is remembered by its arrival time: a waiter that
//   joins afterwards, because the lingering subscription covered its attempt, and whose attempt
//   was sent before that message, must try again instead of sleeping (the release it waits for
//   may be that message); a later attempt already saw that release.
// - After a reconnect every remaining channel is resubscribed, and its sleepers are woken when
//   the confirmation comes (messages may have been lost while down).
//
// `W` is the waiter type (redis/pubsub/waiter.hpp in the library, a fake in tests); the table
// stores pointers and never calls them: it returns who to call.
#pragma once

#include "redis/pubsub/mode.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlock::pubsub {

template <class W>
class channel_table {
public:
    using clock = std::chrono::steady_clock;
    /// How long a channel stays subscribed after its last waiter left.
    static constexpr std::chrono::milliseconds linger{100};

    struct added {
        bool subscribe = false;  ///< first waiter: send SUBSCRIBE
        bool notify_now = false; ///< already active: tell the waiter (asynchronously)
    };
    /// Registers `w` on `channel` (FIFO).
    added add(const std::string& channel, W* w, wake_rule rule) {
        auto [it, fresh] = channels_.try_emplace(channel);
        it->second.waiters.push_back(w);
        it->second.rule = rule;
        return {fresh, !fresh && it->second.active};
    }

    /// Whether `w` is still registered on `channel` (a posted notification checks it).
    bool registered(const std::string& channel, const W* w) const {
        auto it = channels_.find(channel);
        if (it == channels_.end()) return false;
        const auto& ws = it->second.waiters;
        return std::find(ws.begin(), ws.end(), w) != ws.end();
    }

    /// Whether `channel` has a waiter.
    bool registered_any(const std::string& channel) const {
        auto it = channels_.find(channel);
        return it != channels_.end() && !it->second.waiters.empty();
    }

    struct removed {
        bool unsubscribe = false; ///< never confirmed and now unused: send UNSUBSCRIBE now
        bool linger = false;      ///< unused now: sweep after `linger`
    };
    /// Unregisters `w`. Safe for unknown waiters.
    removed remove(const std::string& channel, W* w, clock::time_point now) {
        auto it = channels_.find(channel);
        if (it == channels_.end()) return {};
        entry& e = it->second;
        e.waiters.remove(w);
        e.sleeping.remove(w);
        e.permits = std::min(e.permits, e.waiters.size());
        if (!e.waiters.empty()) return {};
        if (!e.active) { // nothing to keep: not (or no longer) subscribed
            channels_.erase(it);
            return {true, false};
        }
        e.idle_since = now;
        return {false, true};
    }

    /// An error answered one of our (un)subscribe commands; errors name no channel, so every
    /// channel with waiters that is not confirmed may be the refused one: those channels are
    /// forgotten (as dropped) and their waiters returned, to join again.
    std::vector<W*> unconfirmed() {
        std::vector<W*> out;
        std::erase_if(channels_, [&](const auto& c) {
            if (c.second.active || c.second.waiters.empty()) return false;
            out.insert(out.end(), c.second.waiters.begin(), c.second.waiters.end());
            return true;
        });
        return out;
    }

    /// The server dropped `channel` on its own (Cluster: `sunsubscribe` when the channel's slot
    /// left the node). Forgets the channel; returns its waiters (in order), who must join again
    /// where the slot is now.
    std::vector<W*> dropped(const std::string& channel) {
        auto it = channels_.find(channel);
        if (it == channels_.end()) return {};
        std::vector<W*> out(it->second.waiters.begin(), it->second.waiters.end());
        channels_.erase(it);
        return out;
    }

    /// `w`, whose last attempt was sent at `attempt_sent_at`, is about to sleep. True: a
    /// stored permit was consumed, or a message came while the channel lingered after that
    /// attempt was sent (try again now). False: `w` is a sleeper now and will be returned by a
    /// later message or confirmation.
    bool sleep(const std::string& channel, W* w,
               clock::time_point attempt_sent_at = clock::time_point::max()) {
        auto it = channels_.find(channel);
        if (it == channels_.end()) return false;
        entry& e = it->second;
        if (e.permits > 0) {
            --e.permits;
            return true;
        }
        if (e.lingering_message && e.lingering_message_at >= attempt_sent_at) return true;
        e.sleeping.push_back(w);
        return false;
    }
    /// `w` woke for another reason (timer): it is no longer a sleeper.
    void awake(const std::string& channel, W* w) {
        auto it = channels_.find(channel);
        if (it != channels_.end()) it->second.sleeping.remove(w);
    }
    /// The longest-sleeping waiter of an active `channel` that `accept` takes, removed from
    /// the sleepers (it stays registered); null if none.
    W* take_sleeping(const std::string& channel, const std::function<bool(const W&)>& accept) {
        auto it = channels_.find(channel);
        if (it == channels_.end() || !it->second.active) return nullptr;
        auto& sl = it->second.sleeping;
        for (auto w = sl.begin(); w != sl.end(); ++w) {
            if (!accept(**w)) continue;
            W* taken = *w;
            sl.erase(w);
            return taken;
        }
        return nullptr;
    }

    /// A command sent at `t` was processed by the server after the channel's SUBSCRIBE.
    bool active_since(const std::string& channel, clock::time_point t) const {
        auto it = channels_.find(channel);
        return it != channels_.end() && it->second.active && it->second.confirmed_at <= t;
    }

    /// The server confirmed `channel`: `notify` gets the waiters to tell (on_active), `wake`
    /// the sleepers that went to sleep while it was inactive (after a reconnect: messages may
    /// have been lost meanwhile).
    void confirmed(const std::string& channel, clock::time_point now, std::vector<W*>& notify,
                   std::vector<W*>& wake_now) {
        notify.clear();
        wake_now.clear();
        auto it = channels_.find(channel);
        if (it == channels_.end()) return;
        entry& e = it->second;
        const bool reconnect = !e.active && !e.sleeping.empty();
        if (!e.active) e.confirmed_at = now;
        e.active = true;
        notify.assign(e.waiters.begin(), e.waiters.end());
        if (reconnect) {
            wake_now.assign(e.sleeping.begin(), e.sleeping.end());
            e.sleeping.clear();
        }
    }

    /// An unlock message on `channel`, received at `now`: the sleepers to wake, by the
    /// channel's wake rule.
    void message(const std::string& channel, std::string_view payload, std::vector<W*>& wake_now,
                 clock::time_point now = clock::now()) {
        wake_now.clear();
        auto it = channels_.find(channel);
        if (it == channels_.end()) return;
        entry& e = it->second;
        const wake whom = e.rule ? e.rule(payload) : wake::one;
        if (whom == wake::none) return;
        if (e.waiters.empty()) { // lingering: see sleep()
            e.lingering_message = true;
            e.lingering_message_at = now;
            return;
        }
        switch (whom) {
        case wake::none:
            return;
        case wake::all:
            wake_now.assign(e.sleeping.begin(), e.sleeping.end());
            e.sleeping.clear();
            e.permits = e.waiters.size() - wake_now.size();
            return;
        case wake::one:
            if (!e.sleeping.empty()) {
                wake_now.push_back(e.sleeping.front());
                e.sleeping.pop_front();
            } else if (e.permits < e.waiters.size()) {
                ++e.permits;
            }
            return;
        }
    }

    /// The connection dropped: lingering channels go, the others wait for a resubscription.
    void disconnected() {
        std::erase_if(channels_, [](const auto& c) { return c.second.waiters.empty(); });
        for (auto& [name, e] : channels_)
            e.active = false;
    }
    /// Every channel to subscribe again on a fresh connection.
    template <class F>
    void for_each_channel(F&& f) const {
        for (const auto& [name, e] : channels_)
            f(name);
    }

    /// Drops channels idle for `linger`; `gone` gets them (send UNSUBSCRIBE). True when some
    /// idle channel remains (sweep again later).
    bool sweep(clock::time_point now, std::vector<std::string>& gone) {
        gone.clear();
        bool more = false;
        for (auto it = channels_.begin(); it != channels_.end();) {
            if (!it->second.waiters.empty()) {
                ++it;
                continue;
            }
            if (now - it->second.idle_since < linger) {
                more = true;
                ++it;
                continue;
            }
            gone.push_back(it->first);
            it = channels_.erase(it);
        }
        return more;
    }

    std::size_t channel_count() const noexcept { return channels_.size(); }
    std::size_t sleeping_count(const std::string& channel) const {
        auto it = channels_.find(channel);
        return it == channels_.end() ? 0 : it->second.sleeping.size();
    }

private:
    struct entry {
        std::list<W*> waiters; // FIFO
        std::list<W*> sleeping;
        std::size_t permits = 0;
        wake_rule rule = nullptr;
        bool active = false;
        clock::time_point confirmed_at{}; // when `active` last became true
        clock::time_point idle_since{};   // no waiters since (if none)
        bool lingering_message = false;   // a message came while there was no waiter
        clock::time_point lingering_message_at{};
    };
    std::unordered_map<std::string, entry> channels_;
};

} // namespace dlock::pubsub
