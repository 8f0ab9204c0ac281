// dlock::client: the public facade over one detail::lock_backend, chosen by the URL's scheme
// (backends.cpp). Nothing here depends on which backend it is; what one backend alone has is a
// free function of its own header (dlock/redis.hpp -> src/redis.cpp, dlock/zookeeper.hpp ->
// src/zookeeper.cpp).
#include "access.hpp"
#include "backends.hpp"
#include "core/kinds.hpp"
#include "hand_out.hpp"
#include "redis/backend.hpp" // client(client_options)

#include <dlock/mutex.hpp>
#include <dlock/rw_mutex.hpp>

namespace dlock {

namespace {
std::shared_ptr<detail::lock_backend> backend_for(std::string_view url, const log_options& log) {
    std::error_code ec;
    std::string why;
    auto b = detail::make_backend(url, ec, &why, log);
    if (ec) throw error(ec, why);
    return b;
}
} // namespace

client::client(std::string_view url)
    : backend_(backend_for(url, {})) {}

client::client(std::string_view url, log_options log)
    : backend_(backend_for(url, log)) {}

client::client(client_options opts)
    : backend_(std::make_shared<detail::redis_backend>(std::move(opts))) {}

client::client(std::shared_ptr<detail::lock_backend> backend)
    : backend_(std::move(backend)) {}

client::~client() {
    if (backend_) backend_->shutdown();
}
client::client(client&&) noexcept = default;
client& client::operator=(client&& o) noexcept {
    if (this != &o) {
        if (backend_) backend_->shutdown();
        backend_ = std::move(o.backend_);
    }
    return *this;
}

const client_options& client::options() const noexcept {
    return backend_->options();
}
const std::string& client::id() const noexcept {
    return backend_->id();
}
std::string_view client::backend_name() const noexcept {
    return backend_->backend_name();
}

bool detail::valid_hold_options(const acquire_options& o) noexcept {
    return !(o.warn_margin && o.warn_margin->count() < 0) &&
           !(o.max_hold && o.max_hold->count() <= 0);
}

void detail::hand_out(hold& h, const acquire_options& o) {
    h.set_kind(o.kind);
    h.set_warn_margin(o.warn_margin);
    h.set_max_hold(o.max_hold);
}

namespace {
/// Errors whose cause last_error_detail() can name (the connection or the server's reply).
bool has_detail(const std::error_code& ec) {
    return ec == errc::unavailable || ec == errc::auth_failed || ec == errc::permission_denied ||
           ec == errc::configuration_error || ec == errc::out_of_memory ||
           ec == errc::server_busy || ec == errc::readonly || ec == errc::server_error;
}

/// The backend for a blocking call, or null with `ec` = errc::invalid_argument on the
/// backend's own I/O thread (it would wait for itself).
detail::lock_backend* blocking(const std::shared_ptr<detail::lock_backend>& b,
                               std::error_code& ec) {
    ec = b->on_io_thread() ? make_error_code(errc::invalid_argument) : std::error_code{};
    return ec ? nullptr : b.get();
}
} // namespace

std::string client::last_error_detail() const {
    return backend_->last_error_detail();
}

void client::throw_with_detail(const std::error_code& ec) const {
    if (!ec || !has_detail(ec)) return;
    if (auto d = last_error_detail(); !d.empty()) throw error(ec, d);
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
    if (ec == errc::unsupported && !backend_->supports(opts.kind))
        throw error(ec, detail::unsupported_kind_text(backend_name(), opts.kind));
    throw_with_detail(ec);
    throw_if(ec);
    return l;
}

namespace {
/// blocking(), and errc::unsupported for a kind the backend does not offer: the one check of
/// the seam's contract for every backend's queries.
detail::lock_backend* offering(const std::shared_ptr<detail::lock_backend>& b, lock_kind kind,
                               std::error_code& ec) {
    auto* p = blocking(b, ec);
    if (p && !p->supports(kind)) ec = make_error_code(errc::unsupported);
    return ec ? nullptr : p;
}
} // namespace

lock_status client::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    auto* b = offering(backend_, kind, ec);
    auto s = b ? b->inspect(name, kind, ec) : lock_status{};
    if (b) s.backend = b->backend_name(); // one schema: every status names its backend
    return s;
}

std::vector<lock_status> client::list(std::string_view pattern, std::error_code& ec) {
    auto* b = blocking(backend_, ec);
    auto all = b ? b->list(pattern, ec) : std::vector<lock_status>{};
    for (auto& s : all)
        s.backend = b->backend_name();
    return all;
}

bool client::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    auto* b = offering(backend_, kind, ec);
    return b && b->force_unlock(name, kind, ec);
}

bool client::force_unlock(std::string_view name, lock_kind kind) {
    std::error_code ec;
    const bool ended = force_unlock(name, kind, ec);
    throw_with_detail(ec);
    throw_if(ec);
    return ended;
}

lease client::acquire(std::string_view name, const acquire_options& opts, std::error_code& ec) {
    auto* b = blocking(backend_, ec);
    if (!b) return {};
    if (!detail::valid_hold_options(opts)) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    auto h = b->acquire(name, opts, ec);
    if (h && !ec) detail::hand_out(*h, opts);
    return h && !ec ? detail::access::make_lease(std::move(h)) : lease{};
}

void client::start_async_acquire(std::string name, const acquire_options& opts,
                                 std::function<void(std::error_code, lease)> done) {
    if (!detail::valid_hold_options(opts))
        return done(make_error_code(errc::invalid_argument), lease{});
    backend_->async_acquire(
        std::move(name), opts,
        [done = std::move(done), opts](std::error_code e, std::shared_ptr<detail::hold> h) {
            if (h && !e) detail::hand_out(*h, opts);
            done(e, h && !e ? detail::access::make_lease(std::move(h)) : lease{});
        });
}

metrics_snapshot client::metrics() const {
    return backend_->metrics();
}

asio::any_io_executor client::get_executor() const {
    return backend_->executor();
}

} // namespace dlock
