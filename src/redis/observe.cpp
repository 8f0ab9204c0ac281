// observe() on Redis (redis/locks/election/protocol.hpp): one observation of an election, on the
// client's I/O thread, without polling. The observer subscribes to the election's channel
// (every grant, proclaim and resign publishes there) and reads the leader (leader.lua) once the
// subscription is confirmed, then after every message. A leader that dies publishes nothing:
// its lock N expires, so after each read that found N held the observer arms one timer at N's
// PTTL and reads again then (one read per lease while a leader lives, not a poll loop). A
// reconnect of the pub/sub connection wakes the observer (messages may have been lost), and a
// read that fails is tried again a second later. The callback gets a state when it differs from
// the last one delivered (core/delivering_observer.hpp).
//
// The subscriber wakes every sleeper of the channel on a message (wake::all); a message that
// comes while a read is in flight leaves a permit, so the read after it is never skipped.
#include "core/delivering_observer.hpp"
#include "redis/backend.hpp"
#include "redis/client.hpp"
#include "redis/locks/election/protocol.hpp"
#include "redis/topology/cluster.hpp"

#include <asio/steady_timer.hpp>

namespace dlock::detail {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::chrono::seconds retry_every{1};
/// After N's PTTL: Redis expires a key on access once its time passed, so a read this much
/// later finds it gone.
constexpr std::chrono::milliseconds after_expiry{2};

pubsub::wake wake_all(std::string_view) noexcept {
    return pubsub::wake::all;
}

class redis_observer final : public delivering_observer,
                             public pubsub::waiter,
                             public std::enable_shared_from_this<redis_observer> {
public:
    redis_observer(std::shared_ptr<redis_client> c, lock_keys keys, lock_backend::observe_fn cb)
        : delivering_observer(std::move(cb))
        , c_(std::move(c))
        , keys_(std::move(keys))
        , channel_(election_lock::observer_channel(keys_))
        , timer_(c_->io()) {}

    /// I/O thread; `first` runs once: {} after the first delivery, or the error that prevented
    /// it.
    void start(std::function<void(std::error_code)> first) {
        await_first(std::move(first));
        join();
        // The first read waits for the subscription (so no change after it goes unseen), but
        // not for ever: a server that does not answer fails the read instead.
        arm(clock::now() + c_->options().command_timeout);
    }

    void stop() noexcept override {
        delivering_observer::stop(); // no callback after this returns
        // Leaving the subscriber happens on the I/O thread (also when called there, from a
        // callback), with a strong reference: the observer cannot go before it left.
        if (auto self = weak_from_this().lock()) c_->rt().try_post([self] { self->end(); });
    }

    // pubsub::waiter
    void on_active() override { want_read(); }
    void on_wake() override { want_read(); }
    void on_dropped() override {
        joined_ = nullptr; // the subscriber already forgot us
        auto again = [w = weak_from_this()](bool) {
            auto self = w.lock();
            if (!self || !self->wanted() || self->joined_) return;
            self->join();
            self->want_read();
        };
        if (auto* cl = c_->router().cluster_map())
            cl->refresh(std::move(again));
        else
            again(true);
    }
    bool takes_handover_of(const redis_hold&) const override { return false; }
    std::string_view owner() const noexcept override { return {}; }
    std::chrono::milliseconds lease() const noexcept override { return {}; }
    std::shared_ptr<waiter> share() override { return shared_from_this(); }
    void handover_begin(clock::time_point) override {}
    void handover_done(handover_result, std::uint64_t) override {}

private:
    struct read_request final : request {
        std::shared_ptr<redis_observer> keep; // alive while the read is in flight
        command cmd;
        void complete(std::error_code ec, resp3::value&& v) override {
            auto self = std::move(keep);
            self->on_read(ec, v);
        }
    };

    bool wanted() const noexcept { return !ended_ && !stopped() && !c_->shut_down(); }

    void join() {
        joined_ = &c_->router().for_slot(keys_.slot).subscriber();
        joined_->add(channel_, this, &wake_all);
    }

    /// I/O thread: no more reads, timers or messages.
    void end() {
        ended_ = true;
        cancel_timer();
        if (joined_) std::exchange(joined_, nullptr)->remove(channel_, this);
    }

    void want_read() {
        if (!wanted()) return;
        if (reading_) {
            again_ = true; // after the read in flight
            return;
        }
        cancel_timer();
        if (joined_) joined_->awake(channel_, this);
        read();
    }

    void read() {
        reading_ = true;
        again_ = false;
        sent_at_ = clock::now();
        election_protocol().leader_query(req_.cmd, keys_);
        req_.args = req_.cmd.args();
        req_.eval_fallback = req_.cmd.eval_fallback();
        req_.deadline = sent_at_ + c_->options().command_timeout;
        req_.keep = shared_from_this();
        c_->router().for_slot(keys_.slot).conn().submit(req_);
    }

    void on_read(std::error_code ec, const resp3::value& v) {
        reading_ = false;
        if (!wanted()) {
            if (awaiting_first()) finish_first(make_error_code(errc::cancelled));
            return;
        }
        auto r = election_lock::read_leader(v, ec);
        if (ec) {
            if (awaiting_first()) {
                finish_first(ec);
                return end();
            }
            return arm(clock::now() + retry_every);
        }
        deliver(std::move(r.leader));
        if (!wanted()) return; // stopped from inside the callback
        if (again_ || (joined_ && joined_->sleep(channel_, this, sent_at_))) return read();
        if (r.pttl > 0) arm(clock::now() + std::chrono::milliseconds(r.pttl) + after_expiry);
    }

    /// One timer: the first read's bound, a retry, or N's expiry; it reads.
    void arm(clock::time_point at) {
        timer_armed_ = true;
        timer_.expires_at(at);
        timer_.async_wait([w = weak_from_this()](std::error_code ec) {
            auto self = w.lock();
            if (ec || !self) return;
            self->timer_armed_ = false;
            self->want_read();
        });
    }

    void cancel_timer() {
        if (!timer_armed_) return;
        timer_armed_ = false;
        timer_.cancel();
    }

    std::shared_ptr<redis_client> c_;
    lock_keys keys_;
    std::string channel_;
    asio::steady_timer timer_;
    read_request req_;
    // I/O thread only:
    pubsub::subscriber* joined_ = nullptr;
    clock::time_point sent_at_{};
    bool timer_armed_ = false;
    bool reading_ = false;
    bool again_ = false;
    bool ended_ = false;
};

} // namespace

std::shared_ptr<observer> redis_backend::observe(std::string_view name, observe_fn cb,
                                                 std::error_code& ec) {
    ec.clear();
    const auto keys = election_protocol().keys(name, ec);
    if (ec || on_io_thread() || !cb) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    auto o = std::make_shared<redis_observer>(c_, keys, std::move(cb));
    // The first delivery is bounded: the subscription's wait and the read's deadline.
    const auto bound = 2 * c_->options().command_timeout + std::chrono::seconds(1);
    ec = c_->rt().call<std::error_code>(
        [o](std::function<void(std::error_code)> done) { o->start(std::move(done)); },
        make_error_code(errc::cancelled), bound);
    if (ec) {
        o->stop();
        return nullptr;
    }
    return o;
}

} // namespace dlock::detail
