// dlock::client: the public facade over detail::client_impl (Redis) or a detail::lock_backend
// (any other backend, chosen by the URL's scheme in backends.cpp).
#include "backends.hpp"
#include "redis/acquire.hpp"
#include "redis/client_impl.hpp"

#include <dlock/mutex.hpp>
#include <dlock/rw_mutex.hpp>

namespace dlock {

namespace {
std::shared_ptr<detail::lock_backend> backend_for(std::string_view url) {
    std::error_code ec;
    std::string why;
    auto b = detail::make_backend(url, ec, &why);
    if (ec) throw error(ec, why);
    return b;
}
} // namespace

client::client(std::string_view url)
    : backend_(backend_for(url)) {
    if (backend_) return;
    impl_ = std::make_shared<detail::client_impl>(parse_url(url));
    impl_->start();
}

client::client(client_options opts)
    : impl_(std::make_shared<detail::client_impl>(std::move(opts))) {
    impl_->start();
}

client::client(std::shared_ptr<detail::lock_backend> backend)
    : backend_(std::move(backend)) {}

client::~client() {
    if (impl_) impl_->shutdown();
    if (backend_) backend_->shutdown();
}
client::client(client&&) noexcept = default;
client& client::operator=(client&& o) noexcept {
    if (this != &o) {
        if (impl_) impl_->shutdown();
        if (backend_) backend_->shutdown();
        impl_ = std::move(o.impl_);
        backend_ = std::move(o.backend_);
    }
    return *this;
}

const client_options& client::options() const noexcept {
    static const client_options defaults{};
    return impl_ ? impl_->options() : defaults;
}
const std::string& client::id() const noexcept {
    return impl_ ? impl_->id() : backend_->id();
}
std::string_view client::backend_name() const noexcept {
    return impl_ ? std::string_view("redis") : backend_->backend_name();
}

namespace {
/// Errors whose cause last_error_detail() can name (the connection or the server's reply).
bool has_detail(const std::error_code& ec) {
    return ec == errc::unavailable || ec == errc::auth_failed || ec == errc::permission_denied ||
           ec == errc::configuration_error || ec == errc::out_of_memory ||
           ec == errc::server_busy || ec == errc::readonly || ec == errc::server_error;
}
} // namespace

std::string client::last_error_detail() const {
    if (backend_) return backend_->last_error_detail();
    return impl_->router().any().conn().last_failure();
}

void client::throw_with_detail(const std::error_code& ec) const {
    if (!ec || !has_detail(ec)) return;
    if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
}

resp3::value client::command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
}

resp3::value client::command(std::span<const std::string_view> args) {
    std::error_code ec;
    auto v = command(args, ec);
    throw_with_detail(ec);
    throw_if(ec);
    return v;
}

resp3::value client::command(std::span<const std::string_view> args, std::error_code& ec) {
    if (backend_) {
        ec = make_error_code(errc::unsupported);
        return {};
    }
    if (args.empty()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    return impl_->run(impl_->router().any(), args, ec);
}

std::size_t client::masters() const {
    return impl_ ? impl_->router().masters().size() : 0;
}

resp3::value client::command_on_master(std::size_t i, std::span<const std::string_view> args,
                                       std::error_code& ec) {
    if (backend_) {
        ec = make_error_code(errc::unsupported);
        return {};
    }
    const auto all = impl_->router().masters();
    if (args.empty() || i >= all.size()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    return impl_->run(*all[i], args, ec);
}

mutex client::make_mutex(std::string name) {
    return mutex(*this, std::move(name));
}
simple_mutex client::make_simple_mutex(std::string name) {
    return simple_mutex(*this, std::move(name));
}
fair_mutex client::make_fair_mutex(std::string name) {
    return fair_mutex(*this, std::move(name));
}
rw_mutex client::make_rw_mutex(std::string name) {
    return rw_mutex(*this, std::move(name));
}

lease client::acquire(std::string_view name, const acquire_options& opts) {
    std::error_code ec;
    auto l = acquire(name, opts, ec);
    throw_with_detail(ec);
    throw_if(ec);
    return l;
}

namespace {
/// The backend that answers inspect() and list(), or null with `ec` set: errc::unsupported on
/// Redis, errc::invalid_argument on the backend's own I/O thread (these calls block).
detail::lock_backend* querying(const std::shared_ptr<detail::lock_backend>& b,
                               std::error_code& ec) {
    ec.clear();
    if (!b)
        ec = make_error_code(errc::unsupported);
    else if (b->on_io_thread())
        ec = make_error_code(errc::invalid_argument);
    return ec ? nullptr : b.get();
}
} // namespace

lock_status client::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    auto* b = querying(backend_, ec);
    return b ? b->inspect(name, kind, ec) : lock_status{};
}

std::vector<lock_status> client::list(std::string_view pattern, std::error_code& ec) {
    auto* b = querying(backend_, ec);
    return b ? b->list(pattern, ec) : std::vector<lock_status>{};
}

bool client::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec.clear();
    if (backend_) {
        if (backend_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return false;
        }
        return backend_->force_unlock(name, kind, ec);
    }
    // Redis: the lock object of the kind breaks it (Redisson's forceUnlock).
    const std::string n(name);
    try {
        switch (kind) {
        case lock_kind::reentrant:
            return make_mutex(n).force_unlock(ec);
        case lock_kind::simple:
            return make_simple_mutex(n).force_unlock(ec);
        case lock_kind::fair:
            return make_fair_mutex(n).force_unlock(ec);
        case lock_kind::read:
        case lock_kind::write:
            return make_rw_mutex(n).force_unlock(ec);
        default:
            ec = make_error_code(errc::unsupported);
            return false;
        }
    } catch (const dlock::error& e) { // a name no lock object takes
        ec = e.code();
        return false;
    }
}

bool client::force_unlock(std::string_view name, lock_kind kind) {
    std::error_code ec;
    const bool ended = force_unlock(name, kind, ec);
    throw_with_detail(ec);
    throw_if(ec);
    return ended;
}

lease client::acquire(std::string_view name, const acquire_options& opts, std::error_code& ec) {
    ec.clear();
    if (backend_) {
        if (backend_->on_io_thread()) {
            ec = make_error_code(errc::invalid_argument);
            return {};
        }
        auto h = backend_->acquire(name, opts, ec);
        return h && !ec ? detail::access::make_lease(std::move(h)) : lease{};
    }
    auto& c = *impl_;
    if (c.on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    const auto& p = detail::protocol_of(opts.kind);
    auto keys = p.keys(name, ec);
    if (ec) return {};
    detail::acquire_request req;
    if ((ec = detail::prepare(c, p, std::move(keys), opts, detail::new_owner(c, p, false), req)))
        return {};
    const auto res = detail::acquire_blocking(c, req, ec);
    if (ec || !res.acquired) return {};
    return detail::access::make_lease(detail::make_hold(c, req, res));
}

void client::start_async_acquire(std::string name, const acquire_options& opts,
                                 std::function<void(std::error_code, lease)> done) {
    if (backend_)
        return backend_->async_acquire(
            std::move(name), opts,
            [done = std::move(done)](std::error_code e, std::shared_ptr<detail::hold> h) {
                done(e, h && !e ? detail::access::make_lease(std::move(h)) : lease{});
            });
    auto c = impl_;
    const auto& p = detail::protocol_of(opts.kind);
    detail::acquire_request req;
    std::error_code ec;
    auto keys = p.keys(name, ec);
    if (!ec)
        ec = detail::prepare(*c, p, std::move(keys), opts, detail::new_owner(*c, p, false), req);
    if (ec) return asio::post(c->io(), [done = std::move(done), ec] { done(ec, lease{}); });
    detail::acquire_async(*c, std::move(req),
                          [c, done = std::move(done)](std::error_code e, detail::acquire_result r,
                                                      const detail::acquire_request& q) {
                              if (e || !r.acquired) return done(e, lease{});
                              done({}, detail::access::make_lease(detail::make_hold(*c, q, r)));
                          });
}

void client::submit(detail::request& r) {
    if (backend_) return r.complete(make_error_code(errc::unsupported), {});
    if (r.deadline == std::chrono::steady_clock::time_point{})
        r.deadline = std::chrono::steady_clock::now() + impl_->options().command_timeout;
    impl_->router().any().conn().submit(r);
}

metrics_snapshot client::metrics() const {
    return backend_ ? backend_->metrics() : impl_->metrics_snapshot_now();
}

asio::any_io_executor client::get_executor() const {
    return backend_ ? backend_->executor() : impl_->io().get_executor();
}

} // namespace dlock
