#include "etcd/hold.hpp"

#include "core/runtime.hpp"
#include "etcd/backend.hpp"
#include "etcd/layout.hpp"
#include "etcd/ops.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

namespace dlock::detail::etcd {
namespace {

constexpr std::chrono::milliseconds release_retry{200};

} // namespace

etcd_hold::etcd_hold(etcd_backend& backend, const std::shared_ptr<lease_session>& lease,
                     std::string name, std::string range, std::string key, std::int64_t rev,
                     std::uint64_t ticket)
    : backend_(backend.weak_from_this())
    , raw_(&backend)
    , ex_(backend.executor())
    , lease_(lease)
    , name_(std::move(name))
    , range_(std::move(range))
    , key_(std::move(key))
    , rev_(rev)
    , ticket_(ticket)
    , acquired_at_(std::chrono::steady_clock::now())
    , mutex_key_(key_ == own_key(range_, lease->id())) {
    set_valid_until(lease->valid_until());
}

void etcd_hold::start(std::int64_t watch_from) {
    auto self = std::static_pointer_cast<etcd_hold>(shared_from_this());
    auto l = lease_.lock();
    if (!l || l->ended()) return lose(loss_cause::gone);
    l->add_observer(std::weak_ptr<lease_observer>(self));
    watch(watch_from);
}

void etcd_hold::watch(std::int64_t from) {
    auto* b = live();
    if (!b || lost() || released()) return;
    end_watch();
    std::weak_ptr<hold> w = weak_from_this();
    auto ended = [w](key_watch::result r) {
        auto h = std::static_pointer_cast<etcd_hold>(w.lock());
        if (!h || h->lost() || h->released() || h->releasing_) return;
        if (r == key_watch::result::deleted) return h->lose(loss_cause::gone);
        h->recheck();
    };
    if (mutex_key_) {
        watch_ticket_ = b->own_keys().attach(key_, rev_, from, ended);
        if (watch_ticket_ != 0) return;
    }
    watch_ = std::make_shared<key_watch>(b->client(), key_, from, std::move(ended));
    watch_->start();
}

void etcd_hold::end_watch() {
    if (watch_) std::exchange(watch_, nullptr)->cancel();
    if (watch_ticket_ == 0) return;
    if (auto* b = live()) b->own_keys().detach(key_, watch_ticket_);
    watch_ticket_ = 0;
}

void etcd_hold::recheck() {
    auto* b = live();
    if (!b || b->shut()) return;
    std::weak_ptr<hold> w = weak_from_this();
    b->client().range(one_key(key_), [w](grpc::Status s, pb::RangeResponse&& r) {
        auto h = std::static_pointer_cast<etcd_hold>(w.lock());
        if (!h || h->lost() || h->released() || h->releasing_) return;
        if (!s.ok()) { // no member answers now: try again; the lease's deadline decides loss
            auto* b2 = h->live();
            if (!b2 || b2->shut()) return;
            auto t = std::make_shared<asio::steady_timer>(b2->executor(), release_retry);
            t->async_wait([w, t](std::error_code ec) {
                auto h2 = std::static_pointer_cast<etcd_hold>(w.lock());
                if (!ec && h2) h2->recheck();
            });
            return;
        }
        if (r.kvs().empty() || r.kvs(0).create_revision() != h->rev_)
            return h->lose(loss_cause::gone);
        h->watch(r.header().revision() + 1);
    });
}

void etcd_hold::lease_valid_until(std::chrono::steady_clock::time_point t) {
    auto* b = live(); // a keep-alive answer renewed the lease, and with it this hold
    session_renewed(b ? &b->counters() : nullptr, t);
}

void etcd_hold::with_metrics(const std::function<void(client_metrics&)>& f) const {
    with_backend_metrics(live(), backend_, f);
}

void etcd_hold::lease_ended(loss_cause why) {
    if (lost() || released()) return;
    if (releasing_) return finish_release({}); // the key went with the lease
    lose(why);
}

void etcd_hold::leave_queue() {
    if (std::exchange(left_, true)) return;
    if (auto* b = live()) b->leave(range_, ticket_);
}

void etcd_hold::lose(loss_cause cause) {
    if (lost() || released()) return;
    end_watch();
    if (auto* b = live()) {
        b->counters().loss(cause);
        b->counters().hold_ended(std::chrono::steady_clock::now() - acquired_at_);
    }
    mark_lost(cause);
    leave_queue();
}

void etcd_hold::finish_release(std::error_code ec) {
    releasing_ = false;
    if (!ec) {
        if (mark_released())
            if (auto* b = live()) {
                b->counters().release(client_metrics::release_result::released);
                b->counters().hold_ended(std::chrono::steady_clock::now() - acquired_at_);
            }
        end_watch();
        leave_queue();
    } else if (ec == errc::not_owner) {
        if (auto* b = live()) b->counters().release(client_metrics::release_result::not_owner);
        lose(loss_cause::gone);
    }
    auto waiters = std::move(release_waiters_);
    release_waiters_.clear();
    for (auto& w : waiters)
        w(ec);
}

void etcd_hold::send_release() {
    auto* b = live();
    if (!b) return finish_release({});
    auto self = std::static_pointer_cast<etcd_hold>(shared_from_this());
    if (mutex_key_) { // as Go's Mutex.Unlock: no other hold of this key can exist (backend.hpp)
        pb::DeleteRangeRequest d;
        d.set_key(key_);
        return b->client().delete_range(std::move(d),
                                        [self](grpc::Status s, pb::DeleteRangeResponse&& r) {
                                            self->on_released(s, r.deleted() == 1);
                                        });
    }
    b->client().txn(delete_if(key_, rev_), [self](grpc::Status s, pb::TxnResponse&& r) {
        self->on_released(s, r.succeeded());
    });
}

void etcd_hold::on_released(const grpc::Status& s, bool deleted) {
    if (!releasing_) return;
    if (s.ok())
        return finish_release(deleted ? std::error_code{} : make_error_code(errc::not_owner));
    auto* b = live();
    auto l = lease_.lock();
    if (!b || b->shut() || !l || l->ended())
        return finish_release({}); // the key goes with the lease
    b->set_error("release of " + key_ + " on etcd: " + s.error_message());
    auto t = std::make_shared<asio::steady_timer>(b->executor(), release_retry);
    t->async_wait(
        [h = std::static_pointer_cast<etcd_hold>(shared_from_this()), t](std::error_code ec) {
            if (!ec && h->releasing_) h->send_release();
        });
}

void etcd_hold::start_release(std::function<void(std::error_code)> done) {
    if (lost()) return done(make_error_code(errc::not_owner));
    if (released()) return done({});
    release_waiters_.push_back(std::move(done));
    if (releasing_) return;
    releasing_ = true;
    end_watch();
    send_release();
}

void etcd_hold::release_async(std::function<void(std::error_code)> done) {
    auto b = backend_.lock();
    if (!b || b->shut()) return done(lost() ? make_error_code(errc::not_owner) : std::error_code{});
    asio::post(ex_, [self = shared_from_this(), done = std::move(done)]() mutable {
        std::static_pointer_cast<etcd_hold>(self)->start_release(std::move(done));
    });
}

void etcd_hold::release_blocking(std::error_code& ec) {
    if (auto* l = live(); l && l->on_io_thread()) return release_and_wait(ec, true, false, {});
    auto b = backend_.lock(); // a user's thread: may be the last reference, which is fine here
    // Bounded: answered, or the lease's validity passes (then the key goes with the lease).
    release_and_wait(ec, false, b && !b->shut(),
                     b ? b->url().ttl + b->url().connect_timeout : std::chrono::seconds(0));
}

asio::any_io_executor etcd_hold::executor() const {
    if (auto* b = live(); b && !b->shut()) return ex_;
    return {};
}

} // namespace dlock::detail::etcd
