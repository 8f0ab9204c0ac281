// etcd_backend's start and shutdown on its runtime (core/runtime.hpp), the lease (with_lease),
// the local queues and the acquire dispatch. Its queries are in queries.cpp.
#include "etcd/backend.hpp"

#include "core/blocking_acquire.hpp"
#include "core/random.hpp"
#include "etcd/acquire.hpp"
#include "etcd/layout.hpp"
#include "etcd/version.hpp"
#include "etcd/watch_hub.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <chrono>
#include <utility>

namespace dlock::detail::etcd {

etcd_backend::etcd_backend(etcd_url url, std::error_code& ec, std::string& why,
                           const log_options& log)
    : url_(std::move(url))
    , id_(random_uuid())
    , metrics_(log) {
    rpc_ = std::make_unique<rpc>(url_, rt_.executor(), ec, why);
    if (ec) return;
    own_watches_ = std::make_unique<own_watches>(*rpc_);
    rt_.start();
}

etcd_backend::~etcd_backend() {
    shutdown();
}

void etcd_backend::set_error(std::string why) {
    std::lock_guard lk(mu_);
    last_error_ = std::move(why);
}

std::string etcd_backend::last_error_detail() const {
    std::lock_guard lk(mu_);
    return last_error_;
}

std::shared_ptr<lease_session> etcd_backend::current_lease() const {
    std::lock_guard lk(mu_);
    return lease_;
}

metrics_snapshot etcd_backend::metrics() const {
    auto s = metrics_.snapshot();
    s.commands = rpc_ ? rpc_->requests() : 0;
    if (rpc_ && rpc_->watches()) {
        s.watches_cancelled = rpc_->watches()->cancelled();
        s.watch_streams_broken = rpc_->watches()->streams_broken();
    }
    return s;
}

std::error_code etcd_backend::check_name(std::string_view name, lock_kind kind) const {
    if (!supports(kind)) return make_error_code(errc::unsupported);
    return valid_name(name, nullptr) ? std::error_code{} : make_error_code(errc::invalid_argument);
}

std::string etcd_backend::range_of(std::string_view name, std::error_code& ec) {
    std::string why;
    if (!valid_name(name, &why)) {
        set_error(why);
        ec = errc::invalid_argument;
        return {};
    }
    return lock_range(url_.prefix, name);
}

void etcd_backend::track(std::shared_ptr<acquisition> a) {
    active_.push_back(std::move(a));
}

void etcd_backend::untrack(const acquisition* a) {
    std::erase_if(active_, [a](const auto& p) { return p.get() == a; });
}

void etcd_backend::at_shutdown(std::weak_ptr<void> owner, std::function<void()> fn) {
    std::erase_if(at_shutdown_, [](const auto& e) { return e.first.expired(); });
    at_shutdown_.emplace_back(std::move(owner), std::move(fn));
}

std::uint64_t etcd_backend::enter(const std::string& range, std::function<void()> go) {
    const auto ticket = ++next_ticket_;
    auto& q = queues_[range];
    q.emplace_back(ticket, std::move(go));
    if (q.size() == 1) rt_.post(q.front().second); // after the caller has its ticket
    return ticket;
}

std::int64_t etcd_backend::unique_ns() {
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    last_ns_ = std::max<std::int64_t>(now, last_ns_ + 1);
    return last_ns_;
}

void etcd_backend::leave(const std::string& range, std::uint64_t ticket) {
    if (ticket == 0) return; // an RWMutex side: never queued
    const auto it = queues_.find(range);
    if (it == queues_.end()) return;
    auto& q = it->second;
    const bool was_front = !q.empty() && q.front().first == ticket;
    std::erase_if(q, [ticket](const auto& e) { return e.first == ticket; });
    if (q.empty()) {
        queues_.erase(it);
        return;
    }
    if (was_front) rt_.post([go = q.front().second] { go(); });
}

void etcd_backend::with_server(std::function<void(std::error_code)> fn) {
    if (server_ok_) return fn({});
    server_waiters_.push_back(std::move(fn));
    if (std::exchange(checking_server_, true)) return;
    rpc_->status({}, [this](grpc::Status s, pb::StatusResponse&& r) {
        checking_server_ = false;
        std::error_code ec = to_error(s);
        if (!s.ok()) {
            set_error("server status (etcd " + url_.display() + "): " +
                      (ec == errc::unsupported ? "not etcd's v3 API (" + s.error_message() + ")"
                                               : s.error_message()));
        } else if (!version_supported(r.version())) {
            ec = errc::unsupported;
            set_error("etcd " + r.version() + " at " + url_.display() + " is older than " +
                      std::to_string(oldest_major) + "." + std::to_string(oldest_minor) +
                      ", the oldest dlock speaks to");
        } else {
            server_ok_ = true;
        }
        auto waiters = std::exchange(server_waiters_, {});
        for (auto& w : waiters)
            w(ec);
    });
}

void etcd_backend::with_lease(
    std::function<void(std::error_code, std::shared_ptr<lease_session>)> fn) {
    if (shut()) return fn(make_error_code(errc::cancelled), nullptr);
    if (auto l = current_lease(); l && l->granted() && !l->ended()) return fn({}, std::move(l));
    lease_waiters_.push_back(std::move(fn));
    if (granting_) return;
    granting_ = true;
    auto l = std::make_shared<lease_session>(*rpc_, executor(), url_.ttl, metrics_);
    // The grant and the server's check side by side (no round trip more for a first lock); the
    // waiters hear when both answered, the check's error first.
    struct both {
        int left = 2;
        std::error_code server, grant;
        std::string why;
    };
    auto st = std::make_shared<both>();
    const auto one_done = [this, l, st] {
        if (--st->left > 0) return;
        granting_ = false;
        const auto ec = st->server ? st->server : st->grant;
        if (st->server) {
            if (!st->grant) l->revoke([] {}); // granted on a server we refuse: given back
        } else if (st->grant) {
            set_error(st->why + " (etcd " + url_.display() + ")");
        } else {
            std::lock_guard lk(mu_);
            lease_ = l;
        }
        auto waiters = std::exchange(lease_waiters_, {});
        for (auto& w : waiters)
            w(ec, ec ? nullptr : l);
    };
    with_server([st, one_done](std::error_code ec) {
        st->server = ec;
        one_done();
    });
    l->start([st, one_done](std::error_code ec, std::string why) {
        st->grant = ec;
        st->why = std::move(why);
        one_done();
    });
}

void etcd_backend::async_acquire(std::string name, const acquire_options& opts,
                                 std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    const auto post_error = [&](errc e, std::string why) {
        set_error(std::move(why));
        rt_.post([done = std::move(done), e] { done(make_error_code(e), nullptr); });
    };
    if (shut()) return post_error(errc::cancelled, "the etcd backend shut down");
    if (!supports(opts.kind))
        return post_error(
            errc::unsupported,
            "this lock kind is not offered on etcd (lock, fair, read, write and semaphore are)");
    if (opts.kind == lock_kind::semaphore && opts.permits < 1)
        return post_error(errc::invalid_argument, "a semaphore needs permits >= 1");
    if (opts.lease)
        return post_error(errc::unsupported,
                          "a fixed lease is not offered on etcd: a lock lives as long as the "
                          "client's lease (kept alive by its keep-alive stream)");
    std::error_code ec;
    auto range = range_of(name, ec);
    if (ec) return post_error(errc::invalid_argument, last_error_detail());
    // `this`, not a shared_ptr: the I/O thread must never hold the last reference (the
    // destructor drains the loop, so the handler runs before the backend goes).
    rt_.post([this, name = std::move(name), range = std::move(range), opts,
              done = std::move(done)]() mutable {
        auto a = std::make_shared<acquisition>(*this, std::move(name), std::move(range), opts,
                                               std::move(done));
        track(a);
        a->start();
    });
}

std::shared_ptr<hold> etcd_backend::acquire(std::string_view name, const acquire_options& opts,
                                            std::error_code& ec) {
    return acquire_blocking(*this, name, opts, ec);
}

void etcd_backend::shutdown() noexcept {
    if (shut_.exchange(true, std::memory_order_acq_rel)) return;
    if (!rt_.running()) return;
    // On the loop: cancel the acquisitions and revoke the lease (its keys go with it; the
    // holds count as lost), waiting at most a second for the revoke's answer.
    auto revoked = std::make_shared<one_shot<bool>>();
    rt_.post([this, revoked] {
        auto active = std::move(active_);
        active_.clear();
        for (auto& a : active)
            a->cancel();
        own_watches_->clear();
        for (auto& [owner, fn] : std::exchange(at_shutdown_, {}))
            if (!owner.expired()) fn();
        std::shared_ptr<lease_session> l;
        {
            std::lock_guard lk(mu_);
            l = std::move(lease_);
        }
        if (!l) return revoked->set(true);
        l->revoke([revoked] { revoked->set(true); });
    });
    if (!rt_.on_io_thread()) (void)revoked->take_for(std::chrono::seconds(1));
    rpc_->close(); // later answers are dropped
    rt_.release_work();
    if (rt_.on_io_thread()) rt_.stop_after_queued();
    rt_.finish(std::chrono::seconds(2));
}

} // namespace dlock::detail::etcd

namespace dlock::detail {

std::shared_ptr<lock_backend> make_etcd_backend(std::string_view url, std::error_code& ec,
                                                std::string* why, const log_options& log) {
    std::string reason;
    auto u = etcd::parse_etcd_url(url, ec, &reason);
    if (!ec) {
        auto b = std::make_shared<etcd::etcd_backend>(std::move(u), ec, reason, log);
        if (!ec) return b;
    }
    if (why) *why = reason;
    return nullptr;
}

} // namespace dlock::detail
