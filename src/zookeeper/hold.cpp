#include "zookeeper/hold.hpp"

#include "core/runtime.hpp"
#include "zookeeper/backend.hpp"
#include "zookeeper/result_codes.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {

void guaranteed_delete(const std::shared_ptr<session>& s, std::string path,
                       std::function<void(int rc)> done) {
    struct state : std::enable_shared_from_this<state> {
        std::weak_ptr<session> s;
        std::string path;
        std::function<void(int)> done;
        bool sent_once = false;
        void attempt() {
            auto sp = s.lock();
            if (!sp || sp->ended()) return done(ZSESSIONEXPIRED);
            sp->when_connected([self = shared_from_this()](std::error_code ec) {
                if (ec) return self->done(ZSESSIONEXPIRED);
                auto sp2 = self->s.lock();
                if (!sp2) return self->done(ZSESSIONEXPIRED);
                sp2->remove(self->path, [self](reply&& r) {
                    if (transport_loss(r.rc)) {
                        self->sent_once = true;
                        return self->attempt();
                    }
                    if (r.rc == ZNONODE && self->sent_once) return self->done(ZOK);
                    if (r.rc == ZINVALIDSTATE || r.rc == ZCLOSING)
                        return self->done(ZSESSIONEXPIRED);
                    self->done(r.rc);
                });
            });
        }
    };
    auto st = std::make_shared<state>();
    st->s = s;
    st->path = std::move(path);
    st->done = std::move(done);
    st->attempt();
}

zk_hold::zk_hold(zk_backend& backend, std::shared_ptr<session> s, std::string name,
                 std::string path, std::int64_t czxid, bool shared)
    : backend_(backend.weak_from_this())
    , raw_(&backend)
    , ex_(backend.executor())
    , watch_timer_(std::in_place, ex_)
    , session_(std::move(s))
    , name_(std::move(name))
    , path_(std::move(path))
    , czxid_(czxid)
    , shared_(shared)
    , acquired_at_(std::chrono::steady_clock::now()) {
    set_valid_until(session_->valid_until());
}

void zk_hold::start() {
    auto self = std::static_pointer_cast<zk_hold>(shared_from_this());
    session_->add_observer(std::weak_ptr<session_observer>(self));
    if (session_->ended()) return lose(loss_cause::gone);
    watch_timer_->expires_after(watch_delay);
    watch_timer_->async_wait([w = std::weak_ptr<hold>(self)](std::error_code ec) {
        auto h = std::static_pointer_cast<zk_hold>(w.lock());
        if (ec || !h || h->lost() || h->released() || h->releasing_) return;
        h->arm_watch();
    });
}

void zk_hold::arm_watch() {
    std::weak_ptr<hold> w = weak_from_this();
    session_->exists(
        path_,
        [w](int type) {
            auto h = std::static_pointer_cast<zk_hold>(w.lock());
            if (!h || h->lost() || h->released()) return;
            if (type == ZOO_DELETED_EVENT) {
                if (!h->releasing_) h->lose(loss_cause::taken);
                return;
            }
            h->arm_watch(); // data changed (a revoke request): keep watching
        },
        [w](reply&& r) {
            auto h = std::static_pointer_cast<zk_hold>(w.lock());
            if (!h || h->lost() || h->released() || h->releasing_) return;
            if (r.rc == ZNONODE) h->lose(loss_cause::taken);
            // Connection loss: the watch is re-armed when the session comes back.
            if (transport_loss(r.rc))
                h->session_->when_connected([w](std::error_code ec) {
                    auto h2 = std::static_pointer_cast<zk_hold>(w.lock());
                    if (!ec && h2 && !h2->lost() && !h2->released() && !h2->releasing_)
                        h2->arm_watch();
                });
        });
}

std::optional<std::uint64_t> zk_hold::fencing_token() const noexcept {
    if (shared_) return std::nullopt;
    return static_cast<std::uint64_t>(czxid_);
}

void zk_hold::session_valid_until(std::chrono::steady_clock::time_point t) {
    auto* b = live(); // an answered ping renewed the session, and with it this hold
    session_renewed(b ? &b->counters() : nullptr, t);
}

void zk_hold::with_metrics(const std::function<void(client_metrics&)>& f) const {
    with_backend_metrics(live(), backend_, f);
}

void zk_hold::session_ended(session_end why) {
    if (lost() || released()) return drop_timers();
    if (releasing_) return finish_release({}); // the node went with the session
    lose(why == session_end::deadline ? loss_cause::deadline : loss_cause::gone);
}

void zk_hold::lose(loss_cause cause) {
    if (lost() || released()) return;
    if (auto* b = live()) {
        b->counters().loss(cause);
        b->counters().hold_ended(std::chrono::steady_clock::now() - acquired_at_);
    }
    mark_lost(cause);
    drop_timers();
    // If only our view ended (deadline) and the session comes back, the node must not
    // linger: the session was closed (session::end), which deletes it.
}

void zk_hold::drop_timers() noexcept {
    watch_timer_.reset();
}

void zk_hold::finish_release(std::error_code ec) {
    releasing_ = false;
    if (!ec) {
        drop_timers();
        if (mark_released())
            if (auto* b = live()) {
                b->counters().release(client_metrics::release_result::released);
                b->counters().hold_ended(std::chrono::steady_clock::now() - acquired_at_);
            }
    } else if (ec == errc::not_owner) {
        if (auto* b = live()) b->counters().release(client_metrics::release_result::not_owner);
        lose(loss_cause::taken);
    }
    auto waiters = std::move(release_waiters_);
    release_waiters_.clear();
    for (auto& w : waiters)
        w(ec);
}

void zk_hold::start_release(std::function<void(std::error_code)> done) {
    if (lost()) return done(make_error_code(errc::not_owner));
    if (released()) return done({});
    // A release asked for after the hold's deadline comes after its loss, even when the
    // session's deadline timer has not run yet (a holder resumed from a pause past its session
    // releases first; fault scenario Z02 saw it answered ok, as ZSESSIONEXPIRED is below):
    // not_owner, as on every backend. The session's deadline ends it, and the node with it.
    if (std::chrono::steady_clock::now() >= valid_until()) {
        if (auto* b = live()) b->counters().release(client_metrics::release_result::not_owner);
        lose(loss_cause::deadline);
        return done(make_error_code(errc::not_owner));
    }
    release_waiters_.push_back(std::move(done));
    if (releasing_) return;
    releasing_ = true;
    // A strong reference: the release waiters live in this hold, and after lease::async_release
    // the pending delete may be the hold's only owner (a weak one dropped them unanswered).
    guaranteed_delete(
        session_, path_, [h = std::static_pointer_cast<zk_hold>(shared_from_this())](int rc) {
            if (!h->releasing_) return;
            if (rc == ZOK || rc == ZSESSIONEXPIRED) return h->finish_release({});
            if (rc == ZNONODE) return h->finish_release(make_error_code(errc::not_owner));
            if (auto* b = h->live()) {
                b->counters().release(client_metrics::release_result::failed);
                b->set_error(std::string("release of ") + h->path_ + " failed: " + zerror(rc));
            }
            h->finish_release(make_error_code(errc::server_error));
        });
}

void zk_hold::release_async(std::function<void(std::error_code)> done) {
    const auto ex = executor(); // empty once the backend is gone
    if (!ex) return done(lost() ? make_error_code(errc::not_owner) : std::error_code{});
    asio::post(ex, [self = shared_from_this(), done = std::move(done)]() mutable {
        std::static_pointer_cast<zk_hold>(self)->start_release(std::move(done));
    });
}

void zk_hold::release_blocking(std::error_code& ec) {
    if (auto* l = live(); l && l->on_io_thread()) return release_and_wait(ec, true, false, {});
    auto b = backend_.lock(); // a user's thread: may be the last reference, which is fine here
    // Bounded: the delete is answered, or the session's deadline ends the session (the extra
    // connect timeout covers a backend shutting down meanwhile).
    release_and_wait(ec, false, b && !b->shut(),
                     b ? session_->url().session_timeout + b->url().connect_timeout
                       : std::chrono::milliseconds(0));
}

asio::any_io_executor zk_hold::executor() const {
    if (auto* b = live(); b && !b->shut()) return ex_;
    return {};
}

} // namespace dlock::detail::zk
