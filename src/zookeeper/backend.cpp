// zk_backend's start and shutdown on its runtime (core/runtime.hpp), the session (with_session)
// and the acquire dispatch. Its queries, downgrade and fenced write are in queries.cpp,
// downgrade.cpp, fencing.cpp.
#include "zookeeper/backend.hpp"

#include "core/blocking_acquire.hpp"
#include "core/random.hpp"
#include "zookeeper/acquire.hpp"
#include "zookeeper/backend_call.hpp"
#include "zookeeper/semaphore.hpp"
#include "zookeeper/server_lag.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

/// What Curator stores in its lock nodes: InetAddress.getLocalHost().getHostAddress().
std::string local_address() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) return "127.0.0.1";
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host, nullptr, &hints, &res) != 0 || !res) return "127.0.0.1";
    char buf[INET_ADDRSTRLEN] = {};
    const auto* a = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
    const bool ok = ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf) != nullptr;
    ::freeaddrinfo(res);
    return ok ? std::string(buf) : "127.0.0.1";
}

} // namespace

std::string_view infix_of(lock_kind kind) noexcept {
    switch (kind) {
    case lock_kind::reentrant:
    case lock_kind::fair:
        return mutex_infix;
    case lock_kind::read:
        return read_infix;
    case lock_kind::write:
        return write_infix;
    case lock_kind::semaphore:
        return lease_infix;
    default:
        return {};
    }
}

zk_backend::zk_backend(zk_url url, const log_options& log)
    : url_(std::move(url))
    , id_(random_uuid())
    , node_data_(local_address())
    , metrics_(log) {
    rt_.start();
}

zk_backend::~zk_backend() {
    shutdown();
}

void zk_backend::set_error(std::string why) {
    std::lock_guard lk(mu_);
    last_error_ = std::move(why);
}

std::string zk_backend::last_error_detail() const {
    std::lock_guard lk(mu_);
    return last_error_;
}

std::shared_ptr<session> zk_backend::current_session() const {
    std::lock_guard lk(mu_);
    return session_;
}

metrics_snapshot zk_backend::metrics() const {
    auto s = metrics_.snapshot();
    s.connects = old_connects_.load(std::memory_order_relaxed);
    s.reconnects = old_reconnects_.load(std::memory_order_relaxed);
    s.commands = old_requests_.load(std::memory_order_relaxed);
    if (auto cur = current_session()) {
        s.connects += cur->connects();
        s.reconnects += cur->reconnects();
        s.commands += cur->requests();
    }
    return s;
}

void zk_backend::track(std::shared_ptr<acquisition> a) {
    active_.push_back(std::move(a));
}

void zk_backend::untrack(const acquisition* a) {
    std::erase_if(active_, [a](const auto& p) { return p.get() == a; });
}

void zk_backend::with_session(std::function<void(std::error_code, std::shared_ptr<session>)> fn) {
    if (shut()) return fn(make_error_code(errc::cancelled), nullptr);
    auto s = current_session();
    if (!s || s->ended()) {
        if (s) {
            old_connects_ += s->connects();
            old_reconnects_ += s->reconnects();
            old_requests_ += s->requests();
        }
        std::error_code ec;
        std::string why;
        s = session::start(executor(), url_, ec, &why, metrics_.log());
        if (!s) {
            set_error(why);
            return fn(ec, nullptr);
        }
        std::lock_guard lk(mu_);
        session_ = s;
        session_checked_ = false;
    }
    struct state {
        std::function<void(std::error_code, std::shared_ptr<session>)> fn;
        asio::steady_timer timer;
        bool done = false;
        void finish(std::error_code ec, std::shared_ptr<session> s) {
            if (done) return;
            done = true;
            timer.cancel();
            fn(ec, std::move(s));
        }
    };
    auto st = std::make_shared<state>(state{std::move(fn), asio::steady_timer(rt_.io()), false});
    st->timer.expires_after(url_.connect_timeout);
    st->timer.async_wait([this, st, s](std::error_code ec) {
        if (ec || st->done) return;
        set_error("no ZooKeeper server of " + url_.display() + " answered within " +
                  std::to_string(url_.connect_timeout.count()) + " ms" +
                  (s->last_error().empty() ? std::string{} : ": " + s->last_error()));
        st->finish(make_error_code(errc::unavailable), nullptr);
    });
    s->when_connected([this, st, s](std::error_code ec) {
        if (st->done) return;
        if (ec) {
            set_error("ZooKeeper session on " + url_.display() + " ended: " + s->last_error());
            return st->finish(make_error_code(errc::unavailable), nullptr);
        }
        if (session_checked_ && current_session() == s) return st->finish({}, s);
        check_session(s, [this, st, s](std::error_code checked) {
            if (st->done) return;
            if (!checked && current_session() == s) session_checked_ = true;
            st->finish(checked, checked ? nullptr : s);
        });
    });
}

void zk_backend::check_session(const std::shared_ptr<session>& s,
                               std::function<void(std::error_code)> done) {
    using finish_fn = std::function<void(std::error_code, std::string)>;
    auto finish = std::make_shared<finish_fn>(
        [this, done = std::move(done)](std::error_code ec, std::string why) {
            if (ec) set_error(std::move(why));
            done(ec);
        });
    // The lag that fits the negotiated timeout, or the session is refused (and so is every
    // later one: it is shut down).
    const auto settle = [this](session& z, const config_answer* config, const finish_fn& fin) {
        auto c = choose_server_lag(url_, config, z.negotiated());
        if (c.ec == errc::configuration_error) z.shut_down();
        if (!c.ec && !z.lag_settled()) z.settle_lag(c.lag);
        fin(c.ec, std::move(c.why));
    };
    s->exists("/", {}, [this, s, finish, settle](reply&& r) {
        if (r.rc == ZNONODE)
            return (*finish)(make_error_code(errc::configuration_error),
                             "the chroot " + url_.chroot + " does not exist on ZooKeeper " +
                                 url_.display() + " (create it first)");
        if (r.rc != ZOK)
            return (*finish)(
                make_error_code(transport_loss(r.rc) ? errc::unavailable : errc::server_error),
                std::string("ZooKeeper ") + url_.display() + ": " + zerror(r.rc));
        if (url_.server_lag) return settle(*s, nullptr, *finish);
        s->get_config([s, finish, settle](reply&& c) {
            const config_answer config{c.rc, std::move(c.data)};
            settle(*s, &config, *finish);
        });
    });
}

void zk_backend::async_acquire(std::string name, const acquire_options& opts,
                               std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    const auto post_error = [&](errc e, std::string why) {
        set_error(std::move(why));
        rt_.post([done = std::move(done), e] { done(make_error_code(e), nullptr); });
    };
    if (shut()) return post_error(errc::cancelled, "the ZooKeeper backend shut down");
    if (infix_of(opts.kind).empty())
        return post_error(errc::unsupported,
                          "this lock kind is not offered on ZooKeeper (lock, read, write and "
                          "semaphore are)");
    if (opts.kind == lock_kind::semaphore && opts.permits < 1)
        return post_error(errc::invalid_argument, "a semaphore needs permits >= 1");
    if (opts.lease)
        return post_error(errc::unsupported,
                          "a fixed lease is not offered on ZooKeeper: a lock lives as long as "
                          "its session (the session renews itself)");
    std::string why;
    auto dir = lock_dir(name, &why);
    if (dir.empty()) return post_error(errc::invalid_argument, why);
    // `this`, not a shared_ptr: the I/O thread must never hold the last reference (the
    // destructor drains the loop, so the handler runs before the backend goes).
    rt_.post([this, name = std::move(name), dir = std::move(dir), opts,
              done = std::move(done)]() mutable {
        if (opts.kind == lock_kind::semaphore) {
            // Its internal acquisitions are tracked (cancelled at shutdown) and keep it alive.
            std::make_shared<semaphore_acquisition>(*this, std::move(name), std::move(dir), opts,
                                                    std::move(done))
                ->start();
            return;
        }
        auto a = std::make_shared<acquisition>(*this, std::move(name), std::move(dir), opts,
                                               std::move(done));
        track(a);
        a->start();
    });
}

std::shared_ptr<hold> zk_backend::acquire(std::string_view name, const acquire_options& opts,
                                          std::error_code& ec) {
    return acquire_blocking(*this, name, opts, ec);
}

void zk_backend::shutdown() noexcept {
    if (shut_.exchange(true, std::memory_order_acq_rel)) return;
    if (!rt_.running()) return;
    rt_.post([this] {
        auto active = std::move(active_);
        active_.clear();
        for (auto& a : active)
            a->cancel();
        std::shared_ptr<session> s;
        {
            std::lock_guard lk(mu_);
            s = std::move(session_);
        }
        // Closing the session deletes its ephemeral nodes; the holds count as lost.
        if (s) s->shut_down();
    });
    // Let the loop drain (cancelled timers and acquisitions complete, and with them the
    // references they hold to this backend); stop it if that takes longer than a moment.
    rt_.release_work();
    // On the I/O thread: stop after what is queued, and the thread detaches.
    if (rt_.on_io_thread()) rt_.stop_after_queued();
    rt_.finish(std::chrono::seconds(2));
}

} // namespace dlock::detail::zk

namespace dlock::detail {

std::shared_ptr<lock_backend> make_zookeeper_backend(std::string_view url, std::error_code& ec,
                                                     std::string* why, const log_options& log) {
    auto u = zk::parse_zk_url(url, ec, why);
    if (ec) return nullptr;
    return std::make_shared<zk::zk_backend>(std::move(u), log);
}

} // namespace dlock::detail
