// The acquire operation (acquire_async): a thin Asio shell around core::wait_fsm that turns
// replies, confirmations, messages, timers and hand-overs into events and carries out its actions.
#include "redis/acquire.hpp"
#include "redis/acquire_impl.hpp"
#include "redis/release.hpp"
#include "redis/topology/cluster.hpp"

#include <random>

namespace dlock::detail {
namespace {

wait_fsm::params fsm_params(const acquire_request& req) {
    wait_fsm::params p;
    if (req.wait) p.deadline = clock::now() + *req.wait;
    p.single_try = req.wait && req.wait->count() == 0;
    if (req.retry) {
        p.spin_attempts = req.retry->attempts;
        p.spin_delay = req.retry->delay;
        p.spin_jitter = req.retry->jitter;
        thread_local std::minstd_rand seeds{std::random_device{}()};
        p.seed = static_cast<std::uint32_t>(seeds());
    }
    p.ttl_after_refusal = req.protocol->ttl_after_refusal();
    p.fresh_owner = req.fresh_owner;
    p.retry_transient = req.where->follows_master();
    return p;
}

/// Whether the WAIT reply `v` (with `ec`) says at least `n` replicas acknowledged.
bool replicated(std::error_code ec, const resp3::value& v, int n) noexcept {
    return !ec && v.is_integer() && v.integer >= n;
}

class acquire_op final : public std::enable_shared_from_this<acquire_op>,
                         public pubsub::waiter,
                         public cancellable {
public:
    acquire_op(std::shared_ptr<redis_client> c, acquire_request req, acquire_done done)
        : c_(std::move(c))
        , req_(std::move(req))
        , done_(std::move(done))
        , fsm_(fsm_params(req_))
        , channel_(req_.protocol->waiter_channel(req_.keys, req_.owner))
        , timer_(c_->io()) {}

    /// Any thread. The first attempt is submitted from the calling thread (the connection may
    /// write it directly); everything after it runs on the I/O thread.
    void start() {
        self_ = shared_from_this(); // alive until done (requests in flight keep their own)
        if (req_.refused_ttl) {
            // The caller's first attempt (on the sync lane) was refused: continue as after a
            // refusal of our own, on the I/O thread (subscribing happens there).
            return asio::post(c_->io(), [self = shared_from_this()] {
                wait_fsm::event ev{.type = wait_fsm::event_type::start_refused};
                ev.ttl_ms = *self->req_.refused_ttl;
                ev.sent_at = self->req_.refused_sent_at;
                self->resume(ev);
            });
        }
        if (may_queue(*c_, req_))
            return asio::post(c_->io(), [self = shared_from_this()] { self->queue(); });
        if (const auto until = polite_wait(*c_, req_))
            return asio::post(c_->io(), [self = shared_from_this(), until = *until] {
                self->wait_politely(until);
            });
        resume({.type = wait_fsm::event_type::start});
    }

    void cancel() override { resume({.type = wait_fsm::event_type::cancel}); }

    // pubsub::waiter
    void on_active() override { resume({.type = wait_fsm::event_type::active}); }
    void on_wake() override {
        const auto now = clock::now();
        if constexpr (metrics_enabled) woken_at_ = now;
        resume({.type = wait_fsm::event_type::wake, .now = now});
    }
    /// Cluster: the channel's slot left the node we subscribed on; or the server refused the
    /// subscription (an error reply). Load the map again, join the channel on the slot's node
    /// now, and try at once (a release may have come between): a sleeper is woken, and a waiter
    /// still waiting for its confirmation makes the attempt it would make on it.
    void on_dropped() override {
        joined_ = nullptr; // the subscriber already forgot us
        auto again = [w = weak_from_this()](bool) {
            auto self = w.lock();
            if (!self || self->finished_ || self->joined_) return;
            self->reroute();
            self->joined_ = &self->req_.where->subscriber();
            self->joined_->add(self->channel_, self.get(), self->req_.protocol->wake_rule());
            // Each event is ignored in the other's state (subscribing / sleeping).
            self->resume({.type = wait_fsm::event_type::active});
            if (!self->finished_) self->resume({.type = wait_fsm::event_type::wake});
        };
        if (auto* cl = c_->router().cluster_map())
            cl->refresh(std::move(again));
        else
            again(true);
    }
    bool takes_handover_of(const redis_hold& h) const override {
        return fsm_.may_take_handover() && req_.protocol == h.protocol &&
               req_.keys.key == h.keys.key && req_.owner != h.owner;
    }
    std::string_view owner() const noexcept override { return req_.owner; }
    std::chrono::milliseconds lease() const noexcept override { return req_.lease; }
    std::shared_ptr<waiter> share() override { return shared_from_this(); }
    void handover_begin(clock::time_point sent_at) override {
        handover_at_ = sent_at;
        cancel_timer();
        resume({.type = wait_fsm::event_type::handover_begin, .now = sent_at});
    }
    void handover_done(handover_result r, std::uint64_t token) override {
        if (r != handover_result::handed_over) {
            // Published or unknown: the waiter tries again like a woken one.
            if constexpr (metrics_enabled) woken_at_ = clock::now();
            handover_at_ = {};
        }
        wait_fsm::event ev{.type = wait_fsm::event_type::handover_done};
        ev.handover = r;
        ev.token = token;
        resume(ev);
    }

private:
    /// One command in flight (an attempt or the PTTL after a refusal; never two at once).
    struct slot final : request {
        acquire_op* op = nullptr;
        std::shared_ptr<acquire_op> keep; // the op lives while its command is in flight
        bool ttl = false;
        command cmd;
        void complete(std::error_code ec, resp3::value&& v) override {
            auto self = std::move(keep);
            if (ttl)
                return op->resume({.type = wait_fsm::event_type::ttl_reply,
                                   .ttl_ms = lock_protocol::read_ttl(ec, v)});
            wait_fsm::event ev{.type = wait_fsm::event_type::attempt_reply};
            ev.attempt = op->req_.protocol->read_attempt(ec, v);
            if (op->wait_.pending) { // the WAIT behind it decides
                op->wait_.attempt = std::move(ev);
                op->wait_.attempt_done = true;
                op->wait_.keep = std::move(self);
                return;
            }
            op->give_back_unusable_grant(ev);
            op->resume(ev);
        }
    };

    /// The WAIT sent right behind an attempt (client_options::wait_replicas).
    struct wait_slot final : request {
        acquire_op* op = nullptr;
        std::shared_ptr<acquire_op> keep; // the op while the attempt or the WAIT is in flight
        bool pending = false;             // a WAIT follows the attempt in flight
        bool attempt_done = false;        // the attempt's reply came (in `attempt`)
        wait_fsm::event attempt{};
        std::string n, timeout;
        std::string_view cmd[3];
        void complete(std::error_code ec, resp3::value&& v) override {
            auto self = std::move(keep);
            pending = false;
            // Replies come in order: a WAIT answered before its attempt means the attempt was
            // re-sent elsewhere (a moving master) and this WAIT measured nothing of it.
            const bool ok =
                attempt_done && replicated(ec, v, op->c_->options().wait_replicas.replicas);
            attempt_done = false;
            auto ev = std::move(attempt);
            if (ev.attempt.what == attempt_outcome::kind::acquired && !ok) {
                if (op->req_.fresh_owner) undo(*op->c_, op->req_);
                ev.attempt = {};
                ev.attempt.ec = make_error_code(errc::not_replicated);
            }
            if (ev.type != wait_fsm::event_type::attempt_reply) return;
            op->give_back_unusable_grant(ev);
            op->resume(ev);
        }
    };

    /// A fresh grant that cannot be used, given back at once: one whose lease ended before its
    /// reply was read (late_grant(): tried again as if the lock had been found gone), and one
    /// that reached the node while its lock-delay runs (an attempt queued before the master
    /// changed and delivered to the new master after it: the delay is waited out as if the
    /// attempt had not been sent, no second owner during it).
    void give_back_unusable_grant(wait_fsm::event& ev) {
        if (ev.attempt.what != attempt_outcome::kind::acquired || !req_.fresh_owner) return;
        if (late_grant(req_, fsm_.sent_at())) { // see late_grant()
            undo(*c_, req_);
            ev.attempt = {.what = attempt_outcome::kind::held, .ttl_ms = -2};
            return;
        }
        const auto left = paused_for(req_);
        if (left.count() == 0) return;
        undo(*c_, req_);
        ev = {.type = wait_fsm::event_type::paused, .ttl_ms = left.count()};
    }

    /// I/O thread: sleep behind this client's holder without an attempt, when the lock's
    /// channel is already subscribed here (so its release cannot be missed: it hands over to
    /// a sleeping waiter, or publishes to us). Otherwise, or if the hold ended meanwhile, the
    /// normal path.
    void queue() {
        const auto now = clock::now();
        const auto lease = c_->registry().held_here(*req_.protocol, req_.keys.key);
        if (!lease || !sub().active_since(channel_, now))
            return resume({.type = wait_fsm::event_type::start, .now = now});
        resume({.type = wait_fsm::event_type::start_queued, .now = now, .ttl_ms = lease->count()});
    }

    /// I/O thread: wait, before the first attempt, until the head start this client's release
    /// gave the other clients' waiters ends. Not on the channel: that release's own message
    /// may still be on its way to this client's subscriber and would wake us at once. If one
    /// of those waiters took the lock, the attempt is refused and the wait continues as usual.
    void wait_politely(clock::time_point until) {
        timer_armed_ = true;
        timer_.expires_at(until);
        timer_.async_wait([self = shared_from_this()](std::error_code ec) {
            self->timer_armed_ = false;
            if (!ec) self->resume({.type = wait_fsm::event_type::start}); // ignored once finished
        });
    }

    /// Feeds `ev` to the machine and carries out its actions until one waits for the outside.
    /// Nothing of this object is touched after an action that sent a command or finished.
    void resume(wait_fsm::event ev) {
        if (ev.now == clock::time_point{}) ev.now = clock::now();
        while (execute(fsm_.resume(ev), ev)) {
        }
    }

    /// True when the action produced the next event (in `next`).
    bool execute(const wait_fsm::action& a, wait_fsm::event& next) {
        using at = wait_fsm::action_type;
        if (a.undo) undo(*c_, req_);
        if (a.stop_sleeping) sub().awake(channel_, this);
        switch (a.type) {
        case at::none:
            return false;
        case at::send_attempt:
            cancel_timer();
            send(false);
            return false;
        case at::send_ttl_query:
            send(true);
            return false;
        case at::subscribe: {
            // Confirmed before our attempt was sent: that attempt already was the last one.
            const bool covered = sub().active_since(channel_, fsm_.sent_at());
            join();
            next = {.type = wait_fsm::event_type::subscribed, .now = clock::now()};
            next.covered = covered;
            return true;
        }
        case at::sleep:
            if (a.join_channel) join();
            if (a.on_channel && sub().sleep(channel_, this, fsm_.sent_at())) {
                // a stored permit, or a message that came after our last attempt was sent
                next = {.type = wait_fsm::event_type::wake, .now = clock::now()};
                if constexpr (metrics_enabled) woken_at_ = next.now;
                return true;
            }
            arm_timer(a.until);
            return false;
        case at::wait_active:
            arm_timer(a.until);
            return false;
        case at::done:
            finish(a);
            return false;
        }
        return false;
    }

    /// The subscriber the waiter joined (it leaves the same one), else the node's.
    pubsub::subscriber& sub() noexcept { return joined_ ? *joined_ : req_.where->subscriber(); }

    /// Cluster: the slot's node as of the latest map (a MOVED reply to an attempt updates it),
    /// so attempts, the subscription and the hold follow a slot that moved. Elsewhere a no-op.
    void reroute() noexcept {
        if (c_->router().batches_by_slot()) req_.where = &c_->router().for_slot(req_.keys.slot);
    }

    void join() {
        if (!joined_) {
            reroute();
            joined_ = &req_.where->subscriber();
        }
        c_->registry().waiter_added();
        sub().add(channel_, this, req_.protocol->wake_rule());
        if (req_.protocol->queues_on_server())
            c_->registry().queued_waiters[req_.keys.key].push_back(this);
    }

    void leave() {
        sub().remove(channel_, this);
        c_->registry().waiter_removed();
        if (!req_.protocol->queues_on_server()) return;
        auto& all = c_->registry().queued_waiters;
        auto it = all.find(req_.keys.key);
        if (it == all.end()) return;
        std::erase(it->second, static_cast<pubsub::waiter*>(this));
        if (it->second.empty()) all.erase(it);
    }

    void send(bool ttl) {
        if (!ttl) {
            if (const auto left = paused_for(req_); left.count() > 0) {
                // Lock-delay after a failover: no attempt; wait it out (on the I/O thread).
                return asio::post(c_->io(), [self = shared_from_this(), left] {
                    self->resume({.type = wait_fsm::event_type::paused, .ttl_ms = left.count()});
                });
            }
        }
        reroute();
        slot_.op = this;
        slot_.ttl = ttl;
        if (ttl)
            req_.protocol->ttl_query(slot_.cmd, req_.keys);
        else
            build_attempt(*c_, req_, slot_.cmd);
        slot_.args = slot_.cmd.args();
        slot_.eval_fallback = slot_.cmd.eval_fallback();
        slot_.deadline = clock::now() + c_->options().command_timeout;
        slot_.keep = shared_from_this();
        const bool then_wait = !ttl && waits_for_replicas(*c_);
        if (then_wait) {
            const auto& w = c_->options().wait_replicas;
            wait_.op = this;
            wait_.pending = true;
            wait_.attempt_done = false;
            wait_.attempt = {};
            wait_.n = std::to_string(w.replicas);
            wait_.timeout = std::to_string(w.timeout.count());
            wait_.cmd[0] = "WAIT";
            wait_.cmd[1] = wait_.n;
            wait_.cmd[2] = wait_.timeout;
            wait_.args = wait_.cmd;
            wait_.deadline = slot_.deadline + w.timeout;
            wait_.keep = shared_from_this();
        }
        // The attempt's reply may be handled before this returns; with a WAIT behind it, the
        // WAIT's reply decides (both go out on this connection, in this order).
        req_.where->conn().submit(slot_);
        if (then_wait) req_.where->conn().submit(wait_);
    }

    void arm_timer(clock::time_point until) {
        if (until == clock::time_point::max()) return cancel_timer();
        timer_armed_ = true;
        timer_.expires_at(until);
        timer_.async_wait([w = weak_from_this()](std::error_code ec) {
            auto self = w.lock();
            if (ec || !self) return;
            self->timer_armed_ = false;
            self->woken_at_ = {}; // a grant after a timer is no hand-off
            self->resume({.type = wait_fsm::event_type::timer});
        });
    }

    void cancel_timer() {
        if (!timer_armed_) return;
        timer_armed_ = false;
        timer_.cancel();
    }

    void finish(const wait_fsm::action& a) {
        finished_ = true;
        cancel_timer();
        if (a.leave_channel) leave(); // the machine knows whether it joined
        const auto res = a.acquired ? acquired(*c_, req_, a.reentered, a.count, a.token, a.sent_at)
                                    : acquire_result{};
        if (!a.acquired && !a.undo) abandon(*c_, req_); // (undo abandons too)
        count(*c_, req_, a.ec, res);
        if (a.acquired && metrics_enabled) {
            const auto now = clock::now();
            if (handover_at_ != clock::time_point{})
                c_->metrics().handoff_handover(now - handover_at_);
            else if (woken_at_ != clock::time_point{})
                c_->metrics().handoff_wake(now - woken_at_);
        }
        auto keep = std::move(self_);
        auto done = std::move(done_);
        done(a.ec, res, req_);
    }

    std::shared_ptr<redis_client> c_;
    acquire_request req_;
    acquire_done done_;
    wait_fsm fsm_;
    std::string channel_; ///< the channel this waiter sleeps on (the kind's waiter_channel)
    asio::steady_timer timer_;
    bool timer_armed_ = false;
    std::shared_ptr<acquire_op> self_;
    slot slot_;
    wait_slot wait_;
    // Metrics, I/O thread only: when the last wake (message, permit, published hand-over) or
    // the hand-over that may grant the lock began; empty when none.
    clock::time_point woken_at_{};
    clock::time_point handover_at_{};
    pubsub::subscriber* joined_ = nullptr; // I/O thread: set by join(), on_dropped()
    bool finished_ = false;                // I/O thread
};

} // namespace

void acquire_async(redis_client& c, acquire_request req, acquire_done done) {
    if (c.shut_down()) {
        count(c, req, make_error_code(errc::cancelled), {});
        return done(make_error_code(errc::cancelled), acquire_result{}, req);
    }
    auto op = std::make_shared<acquire_op>(c.shared_from_this(), std::move(req), std::move(done));
    op->start();
    c.registry().track(op);
}

} // namespace dlock::detail
