// The acquire operation: attempt, subscribe, last attempt, sleep until woken or the TTL the
// attempt returned, repeat until acquired or the wait deadline passes. Runs on the I/O thread.
#include "redis/client_impl.hpp"
#include "redis/locks/acquire_logic.hpp"
#include "redis/renewal.hpp"

#include <random>

namespace dlock::detail {
namespace {

using clock = std::chrono::steady_clock;

/// The command of one attempt: lock_acquire.lua for the reentrant lock; one SET NX PX for the
/// simple lock (the holder's PTTL is asked for only after a refusal, see query_ttl).
void attempt_command(const acquire_request& req, const std::string& lease_ms,
                     std::vector<std::string_view>& views, std::string_view& eval_fallback) {
    if (req.kind == lock_kind::reentrant) {
        const auto& s = get_script(script_id::reentrant_acquire);
        views = {"EVALSHA", s.sha, "2", req.keys.key, req.keys.token_key, lease_ms, req.owner};
        eval_fallback = s.text;
    } else {
        views = {"SET", req.keys.key, req.owner, "NX", "PX", lease_ms};
        eval_fallback = {};
    }
}

/// The result of an attempt that acquired or re-entered, sent at `sent_at`.
acquire_result acquired(const attempt_outcome& out, clock::time_point sent_at) {
    acquire_result res;
    res.acquired = true;
    res.reentered = out.what == attempt_outcome::kind::reentered;
    res.token = out.token;
    res.count = out.count;
    res.sent_at = sent_at;
    return res;
}

/// After an ambiguous attempt the lock may be ours; release it best-effort (fail closed: the
/// caller is told it does not hold the lock). Safe only for a fresh owner id/token.
void undo(client_impl& c, const acquire_request& req) {
    if (!req.fresh_owner) return;
    std::string_view fallback;
    auto cmd = c.release_command(req.kind, req.keys, req.owner, req.lease, fallback);
    c.submit_release(std::move(cmd), fallback, {});
}

class acquire_op final : public std::enable_shared_from_this<acquire_op>,
                         public net::subscriber::waiter,
                         public cancellable {
public:
    acquire_op(std::shared_ptr<client_impl> c, acquire_request req, acquire_done done)
        : c_(std::move(c))
        , req_(std::move(req))
        , done_(std::move(done))
        , timer_(c_->io()) {
        lease_ms_ = std::to_string(req_.lease.count());
        if (req_.wait) deadline_ = clock::now() + *req_.wait;
    }

    void start() {
        if (!req_.refused_ttl) {
            if (!may_queue(*c_, req_)) return attempt();
            // Held by another owner of this client: queue behind it on the I/O thread.
            return asio::post(c_->io(), [self = shared_from_this()] { self->queue(); });
        }
        // The caller's first attempt (on the sync lane) was refused: continue as after a
        // refusal of our own, on the I/O thread (subscribing happens there).
        asio::post(c_->io(), [self = shared_from_this()] {
            if (self->state_ == state::finished) return;
            self->state_ = state::trying;
            self->sent_at_ = self->req_.refused_sent_at;
            self->refused(*self->req_.refused_ttl);
        });
    }

    void cancel() override { finish(make_error_code(errc::cancelled), acquire_result{}); }

    void on_active() override {
        if (state_ != state::subscribing) return;
        attempt(); // the last attempt before sleeping: a release after it cannot be missed
    }

    void on_wake() override {
        if (state_ != state::sleeping) return;
        timer_.cancel();
        attempt();
    }

    /// May wait for the lock without asking the server first: another owner of this client
    /// holds it, so its release will hand the lock over or publish. Not for a re-entry, a
    /// single try or the spin policy.
    static bool may_queue(client_impl& c, const acquire_request& req) {
        return req.fresh_owner && !req.retry && !(req.wait && req.wait->count() == 0) &&
               c.held_here(req.kind, req.keys.key);
    }

    /// Would take the lock `h` is releasing: asleep on the same lock, waiting by notification.
    bool handover_candidate(const hold_state& h) const {
        return state_ == state::sleeping && !req_.retry && req_.kind == h.kind &&
               req_.keys.key == h.keys.key && req_.owner != h.owner;
    }
    const acquire_request& request_of() const noexcept { return req_; }

    /// A hand-over script naming this waiter was sent at `sent_at` (the subscriber has already
    /// taken us off its sleeping list). Neither the timer nor a message may start an attempt
    /// until handover_done().
    void handover_begin(clock::time_point sent_at) {
        state_ = state::handover;
        timer_.cancel();
        sent_at_ = sent_at;
    }

    /// What the hand-over did, for this waiter.
    enum class handover_result { handed_over, published, unknown, ambiguous };
    void handover_done(handover_result r, std::uint64_t token) {
        if (state_ == state::finished) {
            // Cancelled (shutdown) while the script was in flight: do not keep what it gave us.
            if (r == handover_result::handed_over || r == handover_result::ambiguous)
                undo(*c_, req_);
            return;
        }
        switch (r) {
        case handover_result::handed_over: {
            attempt_outcome out;
            out.what = attempt_outcome::kind::acquired;
            out.token = token;
            return finish({}, acquired(out, sent_at_));
        }
        case handover_result::published:
            return not_acquired(-1); // the unlock message is on its way to our subscriber
        case handover_result::ambiguous:
            undo(*c_, req_); // it may be ours now; the undo runs before our next attempt
            [[fallthrough]];
        case handover_result::unknown:
            return attempt();
        }
    }

private:
    enum class state { idle, trying, subscribing, sleeping, handover, finished };

    /// I/O thread: sleep behind this client's holder without an attempt, when the lock's
    /// channel is already subscribed here (so its release cannot be missed: it hands over to
    /// a sleeping waiter, or publishes to us). Otherwise, or if the hold ended meanwhile, the
    /// normal path.
    void queue() {
        if (state_ != state::idle) return; // cancelled meanwhile
        const auto now = clock::now();
        const auto lease = c_->held_here(req_.kind, req_.keys.key);
        if (!lease || !c_->subscriber().active_since(req_.keys.channel, now)) return attempt();
        subscribed_ = true;
        c_->waiter_added();
        c_->subscriber().add(req_.keys.channel, this);
        if (c_->subscriber().sleep(req_.keys.channel, this)) return attempt(); // stored permit
        state_ = state::sleeping;
        self_ = shared_from_this();
        arm_timer(sleep_until(now, deadline_, lease->count()));
    }

    /// One command of an attempt; forwards its reply to the op.
    struct slot final : request {
        acquire_op* op = nullptr;
        int index = 0;
        std::vector<std::string_view> views;
        void complete(std::error_code ec, resp3::value&& v) override {
            op->on_reply(index, ec, std::move(v));
        }
    };

    void attempt() {
        state_ = state::trying;
        self_ = shared_from_this(); // alive while replies are outstanding
        sent_at_ = clock::now();
        const auto dl = sent_at_ + c_->options().command_timeout;
        int n = 1;
        attempt_command(req_, lease_ms_, slots_[0].views, slots_[0].eval_fallback);
        replies_[1] = resp3::value{};
        for (int i = 0; i < n; ++i) {
            auto& s = slots_[static_cast<std::size_t>(i)];
            s.op = this;
            s.index = i;
            s.args = s.views;
            s.deadline = dl;
            errs_[static_cast<std::size_t>(i)].clear();
        }
        // Set before the first submit: replies may be processed on the I/O thread while this
        // (possibly another) thread is still submitting. Nothing here is touched after that.
        replies_left_ = n;
        for (int i = 0; i < n; ++i)
            c_->conn().submit(slots_[static_cast<std::size_t>(i)]);
    }

    void on_reply(int i, std::error_code ec, resp3::value&& v) {
        errs_[static_cast<std::size_t>(i)] = ec;
        replies_[static_cast<std::size_t>(i)] = std::move(v);
        if (--replies_left_ != 0) return;
        auto keep = std::move(self_);
        if (state_ == state::finished) return; // cancelled while the reply was in flight
        if (ttl_query_) {
            ttl_query_ = false;
            return not_acquired(!errs_[1] && replies_[1].is_integer() ? replies_[1].integer : -1);
        }
        evaluate();
    }

    /// Simple lock refused: ask for the holder's PTTL (see refused()).
    void query_ttl() {
        ttl_query_ = true;
        self_ = shared_from_this();
        auto& s = slots_[1];
        s.views = {"PTTL", req_.keys.key};
        s.op = this;
        s.index = 1;
        s.args = s.views;
        s.eval_fallback = {};
        s.deadline = clock::now() + c_->options().command_timeout;
        errs_[1].clear();
        replies_left_ = 1;
        c_->conn().submit(s);
    }

    void evaluate() {
        const auto out = interpret_attempt(req_.kind, errs_[0], replies_[0], errs_[1], replies_[1]);
        switch (out.what) {
        case attempt_outcome::kind::error:
            return fail(out.ec);
        case attempt_outcome::kind::held:
            return refused(out.ttl_ms);
        case attempt_outcome::kind::acquired:
        case attempt_outcome::kind::reentered:
            return finish({}, acquired(out, sent_at_));
        }
    }

    /// Held by another owner (`ttl`: the holder's PTTL, -1 unknown). A refused simple lock
    /// first asks for the PTTL, which bounds our sleep, unless we will not sleep on it (a
    /// single try, or the spin policy).
    void refused(std::int64_t ttl) {
        if (req_.kind == lock_kind::simple && !req_.retry &&
            !(req_.wait && req_.wait->count() == 0))
            return query_ttl();
        not_acquired(ttl);
    }

    void not_acquired(std::int64_t ttl) {
        const auto now = clock::now();
        if (req_.wait && (req_.wait->count() == 0 || now >= deadline_))
            return finish({}, acquire_result{});
        if (req_.retry) {
            // Spin mode: no subscription; a bounded number of tries with jittered pauses.
            if (++tries_ >= req_.retry->attempts) return finish({}, acquire_result{});
            thread_local std::minstd_rand rng{std::random_device{}()};
            std::uniform_int_distribution<long long> jitter(0, req_.retry->jitter.count());
            state_ = state::sleeping;
            self_ = shared_from_this();
            arm_timer(std::min(deadline_,
                               now + req_.retry->delay + std::chrono::milliseconds(jitter(rng))));
            return;
        }
        if (!subscribed_) {
            // Another waiter of this client already holds a subscription that was confirmed
            // before this attempt was sent: the attempt already was the "last attempt", and
            // every later release publishes to a channel we listen on. (A message that comes
            // before we are registered wakes another local waiter or is kept as a permit,
            // which our sleep() below consumes.) Saves one refused attempt per waiting call.
            const bool covered = c_->subscriber().active_since(req_.keys.channel, sent_at_);
            subscribed_ = true;
            c_->waiter_added();
            c_->subscriber().add(req_.keys.channel, this);
            if (!covered) {
                state_ = state::subscribing;
                arm_timer(deadline_); // bounds the wait for the subscription confirmation
                self_ = shared_from_this();
                return;
            }
        }
        if (ttl == -2) return attempt(); // vanished between our commands: try again now
        if (c_->subscriber().sleep(req_.keys.channel, this)) return attempt(); // stored permit
        state_ = state::sleeping;
        self_ = shared_from_this();
        arm_timer(sleep_until(now, deadline_, ttl));
    }

    void arm_timer(clock::time_point until) {
        if (until == clock::time_point::max()) return;
        timer_.expires_at(until);
        timer_.async_wait([w = weak_from_this()](std::error_code ec) {
            auto self = w.lock();
            if (ec || !self) return;
            self->on_timer();
        });
    }

    void on_timer() {
        if (state_ == state::sleeping) {
            c_->subscriber().awake(req_.keys.channel, this);
            if (req_.wait && clock::now() >= deadline_) return finish({}, acquire_result{});
            return attempt();
        }
        if (state_ == state::subscribing && req_.wait && clock::now() >= deadline_)
            return finish({}, acquire_result{});
    }

    void fail(std::error_code ec) {
        if (ec == errc::ambiguous) undo(*c_, req_);
        finish(ec, acquire_result{});
    }

    void finish(std::error_code ec, acquire_result res) {
        if (state_ == state::finished) return;
        state_ = state::finished;
        if (res.acquired && !res.reentered)
            c_->local_hold_begin(req_.kind, req_.keys.key, req_.lease);
        timer_.cancel();
        if (subscribed_) {
            c_->subscriber().remove(req_.keys.channel, this);
            c_->waiter_removed();
        }
        auto keep = shared_from_this();
        // In-flight requests point into this op: it stays alive until their replies arrive.
        if (replies_left_ == 0) self_.reset();
        auto done = std::move(done_);
        done(ec, res);
    }

    std::shared_ptr<client_impl> c_;
    acquire_request req_;
    acquire_done done_;
    asio::steady_timer timer_;
    std::string lease_ms_;
    clock::time_point deadline_ = clock::time_point::max();
    clock::time_point sent_at_;
    state state_ = state::idle;
    bool subscribed_ = false;
    std::shared_ptr<acquire_op> self_;
    std::array<slot, 2> slots_;
    std::array<std::error_code, 2> errs_;
    std::array<resp3::value, 2> replies_;
    int replies_left_ = 0;
    unsigned tries_ = 0;
    bool ttl_query_ = false;
};

} // namespace

void client_impl::async_acquire(acquire_request req, acquire_done done) {
    if (shut_down()) return done(make_error_code(errc::cancelled), acquire_result{});
    auto op = std::make_shared<acquire_op>(shared_from_this(), std::move(req), std::move(done));
    // The first attempt is submitted from the calling thread (connection::submit is
    // thread-safe and may write directly); everything after it runs on the I/O thread.
    track(op);
    op->start();
}

namespace {

/// How long a hand-over trusts its last PUBSUB NUMSUB check that no other client waits. A
/// waiter of another process that subscribes in between waits at most this long (plus the
/// critical sections in it) before releases publish again.
constexpr auto handover_recheck = std::chrono::milliseconds(1);

/// The hand-over script's reply as the release script's (what the releasing caller reads),
/// and what it means for the waiter.
struct handover_reading {
    acquire_op::handover_result waiter = acquire_op::handover_result::unknown;
    std::uint64_t token = 0;
};

resp3::value integer_one() {
    resp3::value one;
    one.kind = resp3::type::integer;
    one.integer = 1;
    return one;
}

handover_reading read_handover(lock_kind kind, std::error_code ec, resp3::value& v) {
    using hr = acquire_op::handover_result;
    handover_reading r;
    if (ec) {
        r.waiter = ec == errc::ambiguous ? hr::ambiguous : hr::unknown;
        return r;
    }
    if (reply_error(v)) return r;
    if (kind == lock_kind::reentrant && v.kind == resp3::type::array && v.elements.size() == 2 &&
        v.elements[0].is_integer() && v.elements[0].integer == 2 && v.elements[1].is_integer() &&
        v.elements[1].integer > 0) {
        r.waiter = hr::handed_over;
        r.token = static_cast<std::uint64_t>(v.elements[1].integer);
        v = integer_one();
        return r;
    }
    if (!v.is_integer()) return r; // null (not owner) or malformed: the caller decides
    switch (v.integer) {
    case 2:
        if (kind != lock_kind::simple) return r;
        r.waiter = hr::handed_over;
        v = integer_one();
        return r;
    case 1:
        r.waiter = hr::published;
        return r;
    default: // 0: not the owner (simple); anything else is not a reply of these scripts
        return r;
    }
}

} // namespace

void client_impl::release_or_handover(std::shared_ptr<const hold_state> h, release_reply done) {
    acquire_op* w = nullptr;
    if (!shut_down())
        if (auto* taken = sub_->take_sleeping(h->keys.channel, [&](net::subscriber::waiter* x) {
                auto* op = dynamic_cast<acquire_op*>(x);
                return op && op->handover_candidate(*h);
            }))
            w = dynamic_cast<acquire_op*>(taken);
    if (!w) {
        std::string_view fallback;
        auto cmd = release_command(h->kind, h->keys, h->owner, h->lease, fallback);
        return submit_release(std::move(cmd), fallback, std::move(done));
    }
    const auto now = std::chrono::steady_clock::now();
    auto checked = handover_checked_.find(h->keys.channel);
    const bool check =
        checked == handover_checked_.end() || now - checked->second >= handover_recheck;
    const acquire_request& to = w->request_of();
    const bool reentrant = h->kind == lock_kind::reentrant;
    const auto& s =
        get_script(reentrant ? script_id::reentrant_handover : script_id::simple_handover);
    const std::string publish(publish_cmd());
    const std::string numsub = !check ? "" : publish == "SPUBLISH" ? "SHARDNUMSUB" : "NUMSUB";
    std::vector<std::string> cmd;
    if (reentrant)
        cmd = {"EVALSHA",   std::string(s.sha), "3",
               h->keys.key, h->keys.channel,    h->keys.token_key,
               "0",         h->owner,           publish,
               numsub,      to.owner,           std::to_string(to.lease.count())};
    else
        cmd = {"EVALSHA",
               std::string(s.sha),
               "2",
               h->keys.key,
               h->keys.channel,
               h->owner,
               to.owner,
               std::to_string(to.lease.count()),
               publish,
               numsub};
    w->handover_begin(now);
    auto op = w->shared_from_this();
    submit_release(std::move(cmd), s.text,
                   [this, self = shared_from_this(), op, h, check, now,
                    done = std::move(done)](std::error_code ec, resp3::value&& v) {
                       const auto r = read_handover(h->kind, ec, v);
                       if (r.waiter == acquire_op::handover_result::handed_over && check)
                           handover_checked_[h->keys.channel] = now;
                       else if (r.waiter == acquire_op::handover_result::published)
                           handover_checked_.erase(h->keys.channel);
                       if (handover_checked_.size() > 1024)
                           std::erase_if(handover_checked_, [&](const auto& e) {
                               return now - e.second >= handover_recheck;
                           });
                       op->handover_done(r.waiter, r.token);
                       if (done) done(ec, std::move(v));
                   });
}

client_impl::first_attempt client_impl::try_first_attempt(acquire_request& req, acquire_result& res,
                                                          std::error_code& ec) {
    if (!lane_allowed() || shut_down() || on_io_thread() || acquire_op::may_queue(*this, req))
        return first_attempt::not_taken;
    const std::string lease_ms = std::to_string(req.lease.count());
    std::vector<std::string_view> views;
    std::string_view fallback;
    attempt_command(req, lease_ms, views, fallback);
    const auto sent_at = clock::now();
    resp3::value reply;
    ec.clear();
    if (lane_->call(*conn_, views, fallback, sent_at + opts_.command_timeout, reply, ec) !=
        net::sync_lane::result::done)
        return first_attempt::not_taken;
    const auto out = interpret_attempt(req.kind, ec, reply, {}, resp3::value{});
    switch (out.what) {
    case attempt_outcome::kind::error:
        ec = out.ec;
        if (ec == errc::ambiguous) undo(*this, req);
        return first_attempt::finished;
    case attempt_outcome::kind::acquired:
    case attempt_outcome::kind::reentered:
        res = acquired(out, sent_at);
        if (!res.reentered) local_hold_begin(req.kind, req.keys.key, req.lease);
        return first_attempt::finished;
    case attempt_outcome::kind::held:
        break;
    }
    if (req.wait) {
        if (req.wait->count() == 0) return first_attempt::finished; // one try: not acquired
        const auto spent =
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - sent_at);
        req.wait = std::max(std::chrono::milliseconds(1), *req.wait - spent);
    }
    req.refused_ttl = out.ttl_ms;
    req.refused_sent_at = sent_at;
    return first_attempt::refused;
}

std::shared_ptr<hold_state> client_impl::make_hold(const acquire_request& req,
                                                   const acquire_result& r, bool watchdog) {
    auto h = std::make_shared<hold_state>();
    h->client = weak_from_this();
    h->kind = req.kind;
    h->keys = req.keys;
    h->owner = req.owner;
    if (req.kind == lock_kind::reentrant) h->token = r.token;
    h->lease = req.lease;
    h->watchdog = watchdog;
    h->count = static_cast<int>(r.count);
    h->set_valid_until(r.sent_at + req.lease - drift_for(req.lease));
    if (!r.reentered) h->counted_locally(); // local_hold_begin ran when it was acquired
    renewal_->add(h);
    return h;
}

bool client_impl::release(const std::shared_ptr<hold_state>& hp, std::error_code& ec) {
    const hold_state& h = *hp;
    resp3::value v;
    if (handover_possible(h) && !shut_down() && !on_io_thread()) {
        // A waiter of ours may take it over: decided on the I/O thread, where waiters live.
        completion_flag flag;
        asio::post(io_, [&] {
            release_or_handover(hp, [&](std::error_code e, resp3::value&& r) {
                ec = e;
                v = std::move(r);
                flag.set();
            });
        });
        flag.wait();
    } else {
        std::string_view fallback;
        const auto cmd = release_command(h.kind, h.keys, h.owner, h.lease, fallback);
        const std::vector<std::string_view> args(cmd.begin(), cmd.end());
        v = run(args, ec, fallback);
    }
    if (ec) return false;
    if ((ec = reply_error(v))) return false;
    if (h.kind == lock_kind::reentrant) {
        if (v.is_null()) {
            ec = make_error_code(errc::not_owner);
            return false;
        }
        if (!v.is_integer()) {
            ec = make_error_code(errc::protocol_error);
            return false;
        }
        return v.integer == 1;
    }
    if (!v.is_integer()) {
        ec = make_error_code(errc::protocol_error);
        return false;
    }
    if (v.integer != 1) ec = make_error_code(errc::not_owner);
    return v.integer == 1;
}

} // namespace dlock::detail
