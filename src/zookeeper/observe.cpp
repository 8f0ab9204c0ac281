// zk_backend::observe: one observation of an election in LeaderLatch's layout (election.cpp),
// driven by watches on the backend's I/O thread, no polling.
//
// A refresh lists the election's children (with a children watch, armed once at a time) and
// reads the first one in LeaderLatch's order (with a data watch on it, armed once per node: a
// proclaim changes its data); a child deleted between the two reads is skipped by listing
// again; a missing directory is vacant, with an exists watch on it. Any watch firing runs a
// refresh; refreshes never overlap (one that is asked for while another runs follows it). The
// callback gets the result when it differs from the last one delivered. Within a session, the
// C client re-registers the watches after a reconnect and the server fires those whose nodes
// changed meanwhile; when the session ends (expired, deadline) the observation starts again on
// the backend's next session, and delivers the state there if it changed.
//
// Delivering and stopping: core/delivering_observer.hpp.
#include "core/delivering_observer.hpp"
#include "zookeeper/backend.hpp"
#include "zookeeper/backend_call.hpp"

#include <dlock/error.hpp>

#include <asio/steady_timer.hpp>

#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

class zk_observer final : public delivering_observer,
                          public session_observer,
                          public std::enable_shared_from_this<zk_observer> {
public:
    zk_observer(zk_backend& b, std::string dir, lock_backend::observe_fn cb)
        : delivering_observer(std::move(cb))
        , backend_(b.weak_from_this())
        , raw_(&b)
        , dir_(std::move(dir)) {}

    /// Starts on the I/O thread; `first` runs once: {} after the first delivery, or the error
    /// that prevented it.
    void start(std::function<void(std::error_code)> first) {
        await_first(std::move(first));
        connect();
    }

    void session_valid_until(std::chrono::steady_clock::time_point) override {}
    void session_ended(session_end) override { restart(); }

private:
    /// The backend while it lives (I/O thread: its destruction drains the loop first).
    zk_backend* live() const noexcept { return backend_.expired() ? nullptr : raw_; }

    void connect() {
        auto* b = live();
        if (!b || stopped()) return;
        b->with_session(
            [w = weak_from_this(), gen = gen_](std::error_code ec, std::shared_ptr<session> s) {
                auto self = w.lock();
                if (!self || self->stopped() || gen != self->gen_) return;
                if (ec) return self->connect_failed(ec);
                self->session_ = std::move(s);
                self->session_->add_observer(std::weak_ptr<session_observer>(self));
                self->refresh();
            });
    }

    void restart() {
        ++gen_;
        session_.reset();
        busy_ = again_ = children_watch_ = dir_watch_ = false;
        data_watch_.clear();
        if (auto* b = live(); b && !b->shut()) connect();
    }

    /// No session: the first delivery fails with `ec`; after it, try again in a second (the
    /// server may be down for longer than a connect timeout).
    void connect_failed(std::error_code ec) {
        if (awaiting_first()) return finish_first(ec);
        auto* b = live();
        if (!b || b->shut() || ec == errc::cancelled) return;
        auto t = std::make_shared<asio::steady_timer>(b->executor(), std::chrono::seconds(1));
        t->async_wait([t, w = weak_from_this(), gen = gen_](std::error_code e) {
            auto self = w.lock();
            if (!e && self && !self->stopped() && gen == self->gen_) self->connect();
        });
    }

    /// A callback of a request or watch of this session generation, if still wanted.
    template <class F>
    auto guarded(F f) {
        return [w = weak_from_this(), gen = gen_, f = std::move(f)](auto&&... args) {
            auto self = w.lock();
            if (!self || self->stopped() || gen != self->gen_) return;
            f(*self, std::forward<decltype(args)>(args)...);
        };
    }

    void refresh() {
        if (stopped() || !session_) return;
        if (busy_) {
            again_ = true;
            return;
        }
        busy_ = true;
        session::watch_fn watch;
        if (!children_watch_)
            watch = guarded([](zk_observer& o, int) {
                o.children_watch_ = false;
                o.refresh();
            });
        const bool arming = static_cast<bool>(watch);
        session_->children(dir_, std::move(watch), guarded([arming](zk_observer& o, reply&& r) {
                               if (arming && r.rc == ZOK) o.children_watch_ = true;
                               o.on_children(std::move(r));
                           }));
    }

    void done_refresh() {
        busy_ = false;
        if (std::exchange(again_, false)) refresh();
    }

    /// A failed request: retried once connected within the session; a session that ended
    /// restarts through session_ended(); anything else waits for the next event.
    void failed(int rc) {
        busy_ = false;
        if (transport_loss(rc)) {
            session_->when_connected(guarded([](zk_observer& o, std::error_code ec) {
                if (!ec) o.refresh();
            }));
            return;
        }
        if (session_gone(rc)) return;
        if (auto* b = live()) b->set_error("observe " + dir_ + ": " + zerror(rc));
        if (awaiting_first()) finish_first(make_error_code(errc::server_error));
    }

    void on_children(reply&& r) {
        if (r.rc == ZNONODE) {
            // Vacant, no directory yet: an exists watch tells when it is created.
            if (!dir_watch_) {
                dir_watch_ = true;
                session_->exists(dir_, guarded([](zk_observer& o, int) {
                                     o.dir_watch_ = false;
                                     o.refresh();
                                 }),
                                 guarded([](zk_observer& o, reply&& e) {
                                     if (e.rc != ZOK && e.rc != ZNONODE) o.dir_watch_ = false;
                                     if (e.rc == ZOK) o.refresh(); // created meanwhile
                                 }));
            }
            deliver(std::nullopt);
            return done_refresh();
        }
        if (r.rc != ZOK) return failed(r.rc);
        const auto sorted = sort_latch(std::move(r.children));
        if (sorted.empty()) {
            deliver(std::nullopt);
            return done_refresh();
        }
        const auto& first = sorted.front();
        if (first == data_watch_ && delivered()) return done_refresh(); // watched: unchanged
        session::watch_fn watch;
        if (first != data_watch_)
            watch = guarded([node = first](zk_observer& o, int) {
                if (o.data_watch_ == node) o.data_watch_.clear();
                o.refresh();
            });
        const bool arming = static_cast<bool>(watch);
        session_->get(dir_ + "/" + first, std::move(watch),
                      guarded([node = first, arming](zk_observer& o, reply&& g) {
                          if (g.rc == ZNONODE) {
                              o.again_ = true; // deleted meanwhile: list again
                              return o.done_refresh();
                          }
                          if (g.rc != ZOK) return o.failed(g.rc);
                          if (arming) o.data_watch_ = node;
                          leader_info li;
                          li.value = std::move(g.data);
                          li.epoch = g.stat ? static_cast<std::uint64_t>(g.stat->czxid) : 0;
                          o.deliver(std::move(li));
                          o.done_refresh();
                      }));
    }

    std::weak_ptr<zk_backend> backend_;
    zk_backend* raw_;
    std::string dir_;
    // I/O thread only:
    std::shared_ptr<session> session_{};
    std::uint64_t gen_ = 0;       ///< bumped per session: older answers and watches are ignored
    bool busy_ = false;           ///< a refresh is in flight
    bool again_ = false;          ///< refresh again when it ends
    bool children_watch_ = false; ///< a children watch on dir_ is armed
    bool dir_watch_ = false;      ///< an exists watch on dir_ is armed (dir_ missing)
    std::string data_watch_{};    ///< the child whose data watch is armed
};

} // namespace

std::shared_ptr<observer> zk_backend::observe(std::string_view name, observe_fn cb,
                                              std::error_code& ec) {
    ec.clear();
    std::string why;
    auto dir = lock_dir(name, &why);
    if (dir.empty() || on_io_thread() || !cb) {
        if (!why.empty()) set_error("election name: " + why);
        ec = errc::invalid_argument;
        return nullptr;
    }
    auto o = std::make_shared<zk_observer>(*this, std::move(dir), std::move(cb));
    ec = call<std::error_code>([o](std::function<void(std::error_code)> done) { o->start(done); },
                               make_error_code(errc::unavailable));
    if (ec) {
        o->stop();
        return nullptr;
    }
    return o;
}

} // namespace dlock::detail::zk
