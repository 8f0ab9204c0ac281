// The public calls of dlock/redis.hpp that take a client: raw commands over the Redis backend
// (redis/backend.cpp) and fenced_set over fencing/set.lua. On a client of another backend they
// are errc::unsupported (wrong_backend.hpp). layout_of and lock_kinds are in layout.cpp.
#include "access.hpp"
#include "redis/backend.hpp"
#include "redis/client.hpp"
#include "redis/locks/names.hpp"
#include "wrong_backend.hpp"

#include <dlock/redis.hpp>

namespace dlock {

namespace {
/// The Redis backend of `c`, or null with `ec` = errc::unsupported.
detail::redis_backend* redis_of(const client& c, std::error_code& ec) {
    auto* r = detail::access::redis(c);
    ec = r ? std::error_code{} : make_error_code(errc::unsupported);
    return r;
}

/// What a throwing overload throws for `ec`: the wrong backend named; with_detail: the
/// client's last_error_detail() when it explains `ec`; otherwise the code alone.
void throw_for(const client& c, std::string_view call, const std::error_code& ec,
               bool with_detail) {
    if (!ec) return;
    if (!detail::access::redis(c)) throw detail::wrong_backend(c, call, detail::needs_redis);
    if (with_detail) detail::access::throw_with_detail(c, ec);
    throw error(ec);
}
} // namespace

namespace redis {

resp3::value command(client& c, std::initializer_list<std::string_view> args) {
    return command(c, std::span<const std::string_view>(args.begin(), args.size()));
}

resp3::value command(client& c, std::span<const std::string_view> args) {
    std::error_code ec;
    auto v = command(c, args, ec);
    throw_for(c, "dlock::redis::command", ec, true);
    return v;
}

resp3::value command(client& c, std::span<const std::string_view> args, std::error_code& ec) {
    auto* r = redis_of(c, ec);
    return r ? r->command(args, ec) : resp3::value{};
}

std::size_t masters(const client& c, std::error_code& ec) {
    auto* r = redis_of(c, ec);
    return r ? r->masters() : 0;
}

std::size_t masters(const client& c) {
    std::error_code ec;
    const auto n = masters(c, ec);
    throw_for(c, "dlock::redis::masters", ec, false);
    return n;
}

resp3::value command_on_master(client& c, std::size_t i, std::span<const std::string_view> args,
                               std::error_code& ec) {
    auto* r = redis_of(c, ec);
    return r ? r->command_on_master(i, args, ec) : resp3::value{};
}

resp3::value command_on_master(client& c, std::size_t i, std::span<const std::string_view> args) {
    std::error_code ec;
    auto v = command_on_master(c, i, args, ec);
    throw_for(c, "dlock::redis::command_on_master", ec, true);
    return v;
}

bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value, std::error_code& ec) {
    const auto redis = detail::access::impl(c);
    if (!redis) { // other backends fence otherwise (docs/design/fencing.md)
        ec = make_error_code(errc::unsupported);
        return false;
    }
    auto& impl = *redis;
    detail::command cmd;
    cmd.script(detail::script_id::fencing_set).arg("2").arg(key).arg(fence_key);
    cmd.own(std::to_string(token)).arg(value); // all 64 bits, never a negative number
    const auto v = impl.run(impl.router().for_slot(detail::key_slot(key)), cmd, ec);
    if (ec) return false;
    if ((ec = detail::reply_error(v))) return false;
    if (!v.is_integer()) {
        ec = make_error_code(errc::protocol_error);
        return false;
    }
    return v.integer == 1;
}

bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value) {
    std::error_code ec;
    const bool ok = fenced_set(c, key, fence_key, token, value, ec);
    throw_for(c, "dlock::redis::fenced_set", ec, false);
    return ok;
}

} // namespace redis

void detail::redis_submit(client& c, request& r) {
    std::error_code ec;
    if (auto* redis = redis_of(c, ec)) return redis->submit(r);
    r.complete(ec, {});
}

} // namespace dlock
