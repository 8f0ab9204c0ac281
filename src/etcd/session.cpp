#include "etcd/session.hpp"

#include "core/drift.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail::etcd {
namespace {

constexpr std::chrono::milliseconds reopen_delay{200};

} // namespace

lease_session::lease_session(rpc& r, asio::any_io_executor ex, std::chrono::seconds ttl)
    : rpc_(r)
    , ex_(std::move(ex))
    , ttl_(ttl)
    , tick_timer_(ex_)
    , deadline_timer_(ex_)
    , reopen_timer_(ex_) {}

void lease_session::add_observer(std::weak_ptr<lease_observer> o) {
    std::erase_if(observers_, [](const auto& w) { return w.expired(); });
    observers_.push_back(std::move(o));
}

void lease_session::start(std::function<void(std::error_code, std::string)> ready) {
    pb::LeaseGrantRequest req;
    req.set_ttl(ttl_.count());
    const auto sent = clock::now();
    rpc_.lease_grant(std::move(req), [self = shared_from_this(), sent, ready = std::move(ready)](
                                         grpc::Status s, pb::LeaseGrantResponse&& r) {
        if (!s.ok() || !r.error().empty() || r.id() == 0) {
            self->ended_.store(true, std::memory_order_release);
            const auto ec = s.ok() ? make_error_code(errc::server_error) : to_error(s);
            return ready(ec, "lease grant: " + (s.ok() ? r.error() : s.error_message()));
        }
        self->id_.store(r.id(), std::memory_order_release);
        self->extend_to(sent + std::chrono::seconds(r.ttl()) -
                        drift_for(std::chrono::seconds(r.ttl())));
        self->open_stream();
        self->tick();
        ready({}, {});
    });
}

void lease_session::extend_to(clock::time_point t) {
    if (ended()) return;
    valid_until_.store(t.time_since_epoch().count(), std::memory_order_release);
    for (auto& w : observers_)
        if (auto o = w.lock()) o->lease_valid_until(t);
    deadline_timer_.expires_at(t);
    deadline_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        auto self = w.lock();
        if (ec || !self || self->ended()) return;
        if (clock::now() >= self->valid_until()) self->end(loss_cause::deadline);
    });
}

void lease_session::open_stream() {
    if (ended() || stream_) return;
    const auto gen = ++stream_gen_;
    sent_.clear();
    opening_since_ = clock::now();
    std::weak_ptr<lease_session> w = weak_from_this();
    rpc_.open_keepalive(
        [w, gen](pb::LeaseKeepAliveResponse&& a) {
            auto self = w.lock();
            if (self && gen == self->stream_gen_) self->on_answer(a);
        },
        [w, gen](grpc::Status) {
            auto self = w.lock();
            if (self && gen == self->stream_gen_) self->on_stream_end();
        },
        [w, gen](std::shared_ptr<keepalive_stream> s) {
            auto self = w.lock();
            if (!s) return;
            if (!self || gen != self->stream_gen_ || self->ended()) return s->cancel(); // stale
            self->opening_since_.reset();
            self->stream_ = std::move(s);
            // A fresh stream (at start, or after a broken one) renews at once.
            pb::LeaseKeepAliveRequest req;
            req.set_id(self->id());
            self->sent_.push_back(clock::now());
            self->stream_->write(std::move(req));
        });
}

bool lease_session::stuck(std::chrono::milliseconds tick) const {
    const auto now = clock::now();
    const auto late = tick * 9 / 10; // a tick's timer may fire a little early
    if (stream_) return !sent_.empty() && now - sent_.front() >= late;
    return opening_since_ && now - *opening_since_ >= late;
}

void lease_session::tick() {
    if (ended()) return;
    const auto every =
        std::max(std::chrono::milliseconds(ttl_) / 3, std::chrono::milliseconds(100));
    if (stuck(every)) { // give it up: a new stream on the next member renews at once
        ++stream_gen_;
        if (stream_) std::exchange(stream_, nullptr)->cancel();
        reopen_timer_.cancel();
        open_stream();
    } else if (stream_) {
        pb::LeaseKeepAliveRequest req;
        req.set_id(id());
        sent_.push_back(clock::now());
        stream_->write(std::move(req));
    }
    tick_timer_.expires_after(every);
    tick_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        if (auto self = w.lock(); self && !ec) self->tick();
    });
}

void lease_session::on_answer(const pb::LeaseKeepAliveResponse& a) {
    if (ended() || sent_.empty()) return;
    const auto sent = sent_.front();
    sent_.pop_front();
    if (a.ttl() <= 0) return end(loss_cause::gone); // expired or revoked: its keys are gone
    renewals_.fetch_add(1, std::memory_order_relaxed);
    const std::chrono::seconds ttl(a.ttl());
    extend_to(sent + ttl - drift_for(ttl));
}

void lease_session::on_stream_end() {
    stream_.reset();
    sent_.clear();
    opening_since_.reset();
    if (ended()) return;
    ++stream_gen_; // answers of the old stream are stale
    reopen_timer_.expires_after(reopen_delay);
    reopen_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        if (auto self = w.lock(); self && !ec) self->open_stream();
    });
}

void lease_session::end(loss_cause why) {
    if (ended_.exchange(true, std::memory_order_acq_rel)) return;
    valid_until_.store(clock::time_point{}.time_since_epoch().count(), std::memory_order_release);
    tick_timer_.cancel();
    deadline_timer_.cancel();
    reopen_timer_.cancel();
    ++stream_gen_;
    if (stream_) std::exchange(stream_, nullptr)->cancel();
    auto observers = std::move(observers_);
    observers_.clear();
    for (auto& w : observers)
        if (auto o = w.lock()) o->lease_ended(why);
    if (why == loss_cause::deadline && id() != 0) {
        // Our view ended; if the server still keeps the lease, its keys must not linger.
        pb::LeaseRevokeRequest req;
        req.set_id(id());
        rpc_.lease_revoke(std::move(req), [](grpc::Status, pb::LeaseRevokeResponse&&) {});
    }
}

void lease_session::revoke(std::function<void()> done) {
    const auto lease = id();
    end(loss_cause::gone);
    if (lease == 0) return done();
    pb::LeaseRevokeRequest req;
    req.set_id(lease);
    rpc_.lease_revoke(std::move(req), [done = std::move(done)](
                                          grpc::Status, pb::LeaseRevokeResponse&&) { done(); });
}

} // namespace dlock::detail::etcd
