// redis_backend::claim_period / release_period, behind dlock/once.hpp: one key per name,
// "dlock-once:{NAME}" (the name is the hash tag, so Cluster routes it like the name's locks),
// holding "<slot>:<token>" with PX until the slot's end. The slot is counted from TIME inside
// the script (once/claim.lua): the server's clock decides, never the client's.
#include "core/random.hpp"
#include "redis/backend.hpp"
#include "redis/client.hpp"
#include "redis/lock_object.hpp"
#include "redis/locks/names.hpp"
#include "redis/locks/protocol.hpp"

#include <dlock/once.hpp>

#include <string>

namespace dlock::detail {
namespace {

lock_keys once_keys(std::string_view name) {
    lock_keys k;
    k.key = "dlock-once:{" + std::string(name) + "}";
    k.slot = key_slot(k.key);
    return k;
}

std::string stored(const period_slot& s) {
    return std::to_string(s.index) + ":" + s.token;
}

} // namespace

std::optional<period_slot> redis_backend::claim_period(std::string_view name,
                                                       std::chrono::milliseconds period,
                                                       std::error_code& ec) {
    const auto keys = once_keys(name);
    period_slot s;
    s.period = period;
    s.token = random_token();
    detail::command cmd;
    cmd.script(script_id::once_claim).arg("1").arg(keys.key).number(period.count()).arg(s.token);
    const auto v = query_lock(*c_, keys, cmd, ec);
    if (ec) return std::nullopt;
    if (v.elements.size() != 3 || !v.elements[0].is_integer() || !v.elements[1].is_integer() ||
        !v.elements[2].is_integer()) {
        ec = make_error_code(errc::protocol_error);
        return std::nullopt;
    }
    if (v.elements[0].integer != 1) return std::nullopt;
    s.index = v.elements[1].integer;
    s.left = std::chrono::milliseconds(v.elements[2].integer);
    return s;
}

bool redis_backend::release_period(std::string_view name, const period_slot& s,
                                   std::error_code& ec) {
    const auto keys = once_keys(name);
    const auto value = stored(s);
    detail::command cmd;
    cmd.script(script_id::once_release).arg("1").arg(keys.key).arg(value);
    const auto v = query_lock(*c_, keys, cmd, ec);
    if (ec) return false;
    if (!v.is_integer()) {
        ec = make_error_code(errc::protocol_error);
        return false;
    }
    return v.integer == 1;
}

} // namespace dlock::detail
