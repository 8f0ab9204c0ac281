// dlock::fenced_set over fencing/set.lua.
#include "redis/client_impl.hpp"
#include "redis/locks/names.hpp"

#include <dlock/fencing.hpp>

namespace dlock {

bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value, std::error_code& ec) {
    const auto redis = detail::access::impl(c);
    if (!redis) { // a Redis call; other backends have their own (dlock/zk_fencing.hpp)
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
    throw_if(ec);
    return ok;
}

} // namespace dlock
