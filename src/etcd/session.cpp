#include "etcd/session.hpp"

#include "core/drift.hpp"
#include "core/log.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <utility>

namespace dlock::detail::etcd {
namespace {

constexpr std::chrono::milliseconds reopen_delay{200};
/// A keep-alive unanswered this long (or a stream not open after it) makes its stream silent
/// (session.hpp).
constexpr std::chrono::milliseconds silence{500};

} // namespace

lease_session::lease_session(rpc& r, asio::any_io_executor ex, std::chrono::seconds ttl,
                             client_metrics& m)
    : rpc_(r)
    , m_(m)
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
    if (ended() || cur_.s || cur_.opening_since) return;
    const auto gen = ++next_gen_;
    cur_ = lane{.gen = gen, .opening_since = clock::now()};
    arm(); // its silence is due if it does not open
    std::weak_ptr<lease_session> w = weak_from_this();
    rpc_.open_keepalive(
        [w, gen](pb::LeaseKeepAliveResponse&& a) {
            if (auto self = w.lock()) self->on_answer(gen, a);
        },
        [w, gen](const grpc::Status& st) {
            if (auto self = w.lock()) self->on_stream_end(gen, st.error_message());
        },
        [w, gen](std::shared_ptr<keepalive_stream> s) {
            if (!s) return;
            auto self = w.lock();
            auto* l = self ? self->lane_of(gen) : nullptr;
            if (!l || self->ended()) return s->cancel(); // stale
            l->opening_since.reset();
            l->s = std::move(s);
            self->send(*l); // a fresh stream (at start, or after a broken one) renews at once
            self->arm();
        });
}

lease_session::lane* lease_session::lane_of(std::uint64_t gen) {
    if (gen == 0) return nullptr;
    if (cur_.gen == gen) return &cur_;
    if (spare_.gen == gen) return &spare_;
    return nullptr;
}

void lease_session::send(lane& l) {
    if (!l.s) return;
    pb::LeaseKeepAliveRequest req;
    req.set_id(id());
    l.sent.push_back(clock::now());
    l.s->write(std::move(req));
}

void lease_session::drop(lane& l) {
    if (l.s) l.s->cancel();
    l = lane{};
}

bool lease_session::silent(const lane& l, std::chrono::milliseconds after) {
    const auto now = clock::now();
    if (l.s) return !l.sent.empty() && now - l.sent.front() >= after;
    return l.opening_since && now - *l.opening_since >= after;
}

std::chrono::milliseconds lease_session::every() const {
    return std::max(std::chrono::milliseconds(ttl_) / 3, std::chrono::milliseconds(100));
}

std::chrono::milliseconds lease_session::silent_after() const {
    return std::min(every() * 9 / 10, silence);
}

void lease_session::tick() {
    if (ended()) return;
    const auto after = silent_after();
    if (silent(cur_, after)) {
        if (spare_.s && !silent(spare_, after)) { // the spare answers again: it is current
            drop(cur_);
            cur_ = std::exchange(spare_, lane{});
        } else { // kept as the spare until the new stream (on the next member) answers
            lost_stream(cur_, "no keep-alive answer; trying the next member");
            drop(spare_);
            spare_ = std::exchange(cur_, lane{});
            reopen_timer_.cancel();
            open_stream();
        }
    }
    const auto now = clock::now();
    if (now - last_sent_ >= every() * 9 / 10) { // a tick's timer may fire a little early
        last_sent_ = now;
        send(cur_);
        send(spare_);
    }
    next_tick_ = clock::time_point::max();
    arm();
}

void lease_session::arm() {
    if (ended()) return;
    const auto after = silent_after();
    auto wake = last_sent_ + every();
    if (cur_.s && !cur_.sent.empty())
        wake = std::min(wake, cur_.sent.front() + after);
    else if (!cur_.s && cur_.opening_since)
        wake = std::min(wake, *cur_.opening_since + after);
    if (wake >= next_tick_) return; // armed sooner already
    next_tick_ = wake;
    tick_timer_.expires_at(wake);
    tick_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
        if (auto self = w.lock(); self && !ec) self->tick();
    });
}

void lease_session::on_answer(std::uint64_t gen, const pb::LeaseKeepAliveResponse& a) {
    auto* l = lane_of(gen);
    if (ended() || !l || l->sent.empty()) return;
    const auto sent = l->sent.front();
    l->sent.pop_front();
    if (l->peer.empty()) { // its first answer: connected
        l->peer = l->s ? l->s->context().peer() : std::string("unknown");
        const bool again = std::exchange(answered_, true);
        m_.connected(again);
        if (std::exchange(lost_logged_, false))
            log_reconnected(m_.log(), "etcd", l->peer, "keepalive");
        else if (!again) // which member the lease is kept alive through
            log(m_.log(), log_level::debug, "connected",
                {{"backend", "etcd"}, {"address", l->peer}, {"connection", "keepalive"}});
    }
    if (l == &cur_ && spare_.gen != 0) drop(spare_); // the current stream works
    if (a.ttl() <= 0) return end(loss_cause::gone);  // expired or revoked: its keys are gone
    renewals_.fetch_add(1, std::memory_order_relaxed);
    const std::chrono::seconds ttl(a.ttl());
    // A late answer (the spare's, to a keep-alive sent long ago) never moves the bound back.
    if (const auto t = sent + ttl - drift_for(ttl); t > valid_until()) extend_to(t);
}

void lease_session::lost_stream(const lane& l, std::string_view why) {
    if (l.peer.empty() || ended() || lost_logged_) return; // never answered, or said already
    lost_logged_ = true;
    log_connection_lost(m_.log(), "etcd", l.peer, "keepalive", why);
    // The keep-alive renews every hold of the client: it is not being answered now.
    log_session_renewal_failed(m_.log(), observers_,
                               std::string("the lease's keep-alive: ") + std::string(why));
}

void lease_session::on_stream_end(std::uint64_t gen, const std::string& error) {
    auto* l = lane_of(gen);
    if (!l) return;
    if (l == &cur_ && spare_.gen == 0) lost_stream(*l, bounded(error));
    *l = lane{};
    if (l == &spare_ || ended()) return;
    if (spare_.gen != 0) { // the spare carries on
        cur_ = std::exchange(spare_, lane{});
        return;
    }
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
    drop(cur_);
    drop(spare_);
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
