// etcd/session.hpp: the client's one etcd lease and its keep-alive stream, as etcd's
// concurrency.Session keeps it (every hold of the client is bound to it).
//
// start(): LeaseGrant(ttl) (the URL's ttl, default 60 s), then a LeaseKeepAlive stream that
// sends the lease id every ttl/3. Each answer says the TTL the server restarted the lease with:
// valid_until = the send time of the request it answers + that TTL - drift_for(TTL)
// (core/drift.hpp); the grant counts the same way. The session ends (observers told, once):
// - gone: an answer with TTL <= 0 (the lease expired or was revoked: its keys are deleted);
// - deadline: valid_until passed without an answer (no member reachable, no leader); the lease
//   is then revoked, best effort, so that its keys do not outlive our view of them.
// A stream that breaks (a member died, the leader changed) is opened again at once and after
// that every 200 ms, on whatever member the channel picks; the deadline decides the loss. A
// stream that is open but silent (its member frozen or cut off: TCP stays up, nothing answers;
// HTTP/2 pings would find it only after 6 + 2 s, rpc.cpp) is set aside when a keep-alive has
// been unanswered for 500 ms (or the stream has not opened by then; at most 0.9 x ttl/3; the
// session wakes for that only while a keep-alive is unanswered or a stream opening, so an idle
// client wakes twice per ttl/3, not every 250 ms as it did), and a new one is opened at once (the
// channel's round robin puts it on the next member; a fresh stream renews at once). The silent one
// is kept as a spare, still sent keep-alives, until the new one answers: a follower forwards a
// renewal to the leader it knows and waits up to etcd's request timeout (6 s here) when that leader
// froze, so it answers late, not never, and the next member may be the frozen one. Whichever
// answers first renews; a spare that answers again while the current is silent becomes current. A
// healthy answer takes about a millisecond; a false alarm under load costs one stream. revoke():
// the client's shutdown (the keys go with the lease, as Session.Close does).
//
// Connections (core/log.hpp, core/metrics.hpp): a stream's first answer is a connect (the
// session's first stream: metrics' connects and a debug "connected" naming the member; a later
// one: reconnects, and "reconnected" when
// the loss of one that had answered was logged); a stream that had answered and went silent
// ("connection lost, reconnecting", cause: no keep-alive answer, the next member is tried) or
// ended is logged with the member's address (gRPC's peer, "ipv4:127.0.0.1:2379").
//
// Threads: I/O thread only, except the atomics read by id(), ended() and valid_until().
#pragma once

#include "core/metrics.hpp"
#include "etcd/rpc.hpp"

#include <dlock/metrics.hpp>

#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::etcd {

/// What a hold or an acquisition learns from the lease (I/O thread).
class lease_observer {
public:
    virtual void lease_valid_until(std::chrono::steady_clock::time_point t) = 0;
    virtual void lease_ended(loss_cause why) = 0;

protected:
    ~lease_observer() = default;
};

class lease_session : public std::enable_shared_from_this<lease_session> {
public:
    using clock = std::chrono::steady_clock;

    /// `m`: the backend's counters and log sink (outlives the session's I/O).
    lease_session(rpc& r, asio::any_io_executor ex, std::chrono::seconds ttl, client_metrics& m);

    /// Grants the lease and starts the keep-alive; `ready` once: clear when granted, else the
    /// error (`why` for the message).
    void start(std::function<void(std::error_code, std::string why)> ready);
    std::int64_t id() const noexcept { return id_.load(std::memory_order_acquire); }
    bool granted() const noexcept { return id() != 0; }
    bool ended() const noexcept { return ended_.load(std::memory_order_acquire); }
    clock::time_point valid_until() const noexcept {
        return clock::time_point(clock::duration(valid_until_.load(std::memory_order_acquire)));
    }
    void add_observer(std::weak_ptr<lease_observer> o);
    /// A request found the lease gone ("requested lease not found"): ends the session
    /// (observers told `gone`) without waiting for the keep-alive to say so.
    void found_gone() { end(loss_cause::gone); }
    /// Ends the session (observers told `gone`) and revokes the lease; `done` after the answer
    /// or the request's deadline.
    void revoke(std::function<void()> done);
    /// Keep-alive answers received (tests).
    std::uint64_t renewals() const noexcept { return renewals_.load(std::memory_order_relaxed); }

private:
    /// One keep-alive stream: open (s), or asked for (opening_since); `gen` names its callbacks.
    struct lane {
        std::uint64_t gen = 0; ///< 0: no stream
        std::optional<clock::time_point> opening_since{};
        std::shared_ptr<keepalive_stream> s{};
        std::deque<clock::time_point> sent{}; ///< send times of the unanswered keep-alives
        std::string peer{};                   ///< the member, once it answered
    };

    void open_stream();
    void tick();
    /// How often keep-alives go (ttl/3, at least 100 ms), and how long an unanswered one (or a
    /// stream not open) takes to make its stream silent.
    std::chrono::milliseconds every() const;
    std::chrono::milliseconds silent_after() const;
    /// Wakes tick() at the next send, or sooner when the current stream's silence is due.
    void arm();
    lane* lane_of(std::uint64_t gen);
    void send(lane& l);
    void drop(lane& l);
    /// Whether `l` has been silent for `after` (see above).
    static bool silent(const lane& l, std::chrono::milliseconds after);
    void on_answer(std::uint64_t gen, const pb::LeaseKeepAliveResponse& a);
    void on_stream_end(std::uint64_t gen, const std::string& error);
    /// A stream that had answered stopped: logged once until one answers again.
    void lost_stream(const lane& l, std::string_view why);
    void extend_to(clock::time_point t);
    void end(loss_cause why);

    rpc& rpc_;
    client_metrics& m_;
    asio::any_io_executor ex_;
    std::chrono::seconds ttl_;
    asio::steady_timer tick_timer_;
    asio::steady_timer deadline_timer_;
    asio::steady_timer reopen_timer_;
    std::atomic<std::int64_t> id_{0};
    std::atomic<bool> ended_{false};
    std::atomic<clock::rep> valid_until_{0};
    std::atomic<std::uint64_t> renewals_{0};
    // I/O thread only:
    lane cur_{};
    lane spare_{}; ///< a silent stream kept until cur_ answers
    std::uint64_t next_gen_ = 0;
    bool answered_ = false;         ///< a stream of this session answered (connects vs reconnects)
    bool lost_logged_ = false;      ///< "connection lost" said; "reconnected" at the next answer
    clock::time_point last_sent_{}; ///< the last tick that sent keep-alives
    clock::time_point next_tick_ = clock::time_point::max(); ///< when tick_timer_ fires
    std::vector<std::weak_ptr<lease_observer>> observers_{};
};

} // namespace dlock::detail::etcd
