// detail::redis_backend (backend.hpp): the acquisition front-end composed once for every facade
// (keys, prepare, owner, acquire, hold), the queries by name, and the Redis-only calls.
#include "redis/backend.hpp"

#include "redis/acquire.hpp"
#include "redis/client.hpp"
#include "redis/lock_object.hpp"

#include <asio/post.hpp>

namespace dlock::detail {

redis_backend::redis_backend(client_options opts)
    : c_(std::make_shared<redis_client>(std::move(opts))) {
    c_->start();
}

redis_backend::~redis_backend() {
    shutdown();
}

void redis_backend::shutdown() noexcept {
    c_->shutdown();
}

const client_options& redis_backend::options() const noexcept {
    return c_->options();
}
const std::string& redis_backend::id() const noexcept {
    return c_->id();
}
asio::any_io_executor redis_backend::executor() const {
    return c_->io().get_executor();
}
bool redis_backend::on_io_thread() const noexcept {
    return c_->on_io_thread();
}
std::string redis_backend::last_error_detail() const {
    return c_->router().any().conn().last_failure();
}
metrics_snapshot redis_backend::metrics() const {
    return c_->metrics_snapshot_now();
}
bool redis_backend::supports(lock_kind kind) const noexcept {
    return protocol_of(kind).offered();
}
bool redis_backend::reentrant(lock_kind kind) const noexcept {
    return protocol_of(kind).reentrant();
}

std::error_code redis_backend::check_name(std::string_view name, lock_kind kind) const {
    std::error_code ec;
    (void)protocol_of(kind).keys(name, ec);
    return ec;
}

std::shared_ptr<lock_object> redis_backend::make_lock_object(std::shared_ptr<lock_backend> self,
                                                             std::string name, lock_kind kind) {
    (void)self; // the object keeps the redis_client, which outlives this backend's facade
    return make_redis_lock_object(c_, std::move(name), kind);
}

namespace {
/// The request of a lease (a handle's own owner); a semaphore's attempt carries its size.
std::error_code prepare_lease(redis_client& c, const lock_protocol& p, lock_keys keys,
                              const acquire_options& opts, acquire_request& req) {
    if (opts.kind == lock_kind::semaphore && opts.permits < 1)
        return make_error_code(errc::invalid_argument);
    if (auto ec = prepare(c, p, std::move(keys), opts, new_owner(c, p, false), req)) return ec;
    if (opts.kind == lock_kind::semaphore) req.payload = std::to_string(opts.permits);
    return {};
}
} // namespace

std::shared_ptr<hold> redis_backend::acquire(std::string_view name, const acquire_options& opts,
                                             std::error_code& ec) {
    ec.clear();
    auto& c = *c_;
    if (c.on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    const auto& p = protocol_of(opts.kind);
    auto keys = p.keys(name, ec);
    if (ec) return nullptr;
    acquire_request req;
    if ((ec = prepare_lease(c, p, std::move(keys), opts, req))) return nullptr;
    const auto res = acquire_blocking(c, req, ec);
    if (ec || !res.acquired) return nullptr;
    return make_hold(c, std::move(req), res);
}

void redis_backend::async_acquire(
    std::string name, const acquire_options& opts,
    std::function<void(std::error_code, std::shared_ptr<hold>)> done) {
    auto c = c_;
    const auto& p = protocol_of(opts.kind);
    acquire_request req;
    std::error_code ec;
    auto keys = p.keys(name, ec);
    if (!ec) ec = prepare_lease(*c, p, std::move(keys), opts, req);
    if (ec) return asio::post(c->io(), [done = std::move(done), ec] { done(ec, nullptr); });
    acquire_async(
        *c, std::move(req),
        [c, done = std::move(done)](std::error_code e, acquire_result r, const acquire_request& q) {
            if (e || !r.acquired) return done(e, nullptr);
            done({}, make_hold(*c, q, r));
        });
}

namespace {
/// The keys of `name` for `kind`, or `ec` (invalid_argument for a bad name, unsupported for a
/// kind Redis does not offer).
lock_keys keys_for(std::string_view name, lock_kind kind, std::error_code& ec) {
    ec.clear();
    auto keys = protocol_of(kind).keys(name, ec);
    if (ec && ec != errc::unsupported) ec = make_error_code(errc::invalid_argument);
    return keys;
}
} // namespace

bool redis_backend::is_locked(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto keys = keys_for(name, kind, ec);
    return !ec && lock_is_held(*c_, protocol_of(kind), keys, ec);
}

bool redis_backend::rw_is_locked(std::string_view name, std::error_code& ec) {
    const auto keys = keys_for(name, lock_kind::write, ec);
    if (ec) return false;
    detail::command cmd;
    cmd.plain("EXISTS").arg(keys.key); // either mode keeps N: one request, one answer
    const auto v = query_lock(*c_, keys, cmd, ec);
    return !ec && v.is_integer() && v.integer == 1;
}

bool redis_backend::force_unlock(std::string_view name, lock_kind kind, std::error_code& ec) {
    // The read side breaks the whole read-write lock, as the write side does (rw_mutex).
    const auto k = kind == lock_kind::read ? lock_kind::write : kind;
    const auto keys = keys_for(name, k, ec);
    return !ec && force_unlock_lock(*c_, protocol_of(k), keys, ec);
}

std::optional<std::chrono::milliseconds>
redis_backend::remaining_lease(std::string_view name, lock_kind kind, std::error_code& ec) {
    const auto keys = keys_for(name, kind, ec);
    if (ec) return std::nullopt;
    return lock_remaining_lease(*c_, keys, ec);
}

lock_status redis_backend::inspect(std::string_view name, lock_kind kind, std::error_code& ec) {
    (void)keys_for(name, kind, ec);
    if (ec) return {};
    return inspect_redis(*this, name, ec);
}

std::vector<lock_status> redis_backend::list(std::string_view pattern, std::error_code& ec) {
    return list_redis(*this, pattern, ec);
}

resp3::value redis_backend::command(std::span<const std::string_view> args, std::error_code& ec) {
    if (args.empty()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    return c_->run(c_->router().any(), args, ec);
}

std::size_t redis_backend::masters() const {
    return c_->router().masters().size();
}

resp3::value redis_backend::command_on_master(std::size_t i, std::span<const std::string_view> args,
                                              std::error_code& ec) {
    const auto all = c_->router().masters();
    if (args.empty() || i >= all.size()) {
        ec = make_error_code(errc::invalid_argument);
        return {};
    }
    return c_->run(*all[i], args, ec);
}

void redis_backend::submit(request& r) {
    if (r.deadline == std::chrono::steady_clock::time_point{})
        r.deadline = std::chrono::steady_clock::now() + c_->options().command_timeout;
    c_->router().any().conn().submit(r);
}

// ---- access --------------------------------------------------------------------------------

redis_backend* access::redis(const client& c) noexcept {
    return dynamic_cast<redis_backend*>(c.backend_.get());
}

std::shared_ptr<redis_client> access::impl(const client& c) noexcept {
    auto* r = redis(c);
    return r ? r->impl() : nullptr;
}

} // namespace dlock::detail
