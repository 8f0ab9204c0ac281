// The typed error of a backend's own call (dlock/redis.hpp, redlock.hpp, zookeeper.hpp) on a
// client of another backend: errc::unsupported, with a message naming the call, the client it
// needs and the backend the client has.
#pragma once

#include <dlock/client.hpp>
#include <dlock/error.hpp>

#include <string>
#include <string_view>

namespace dlock::detail {

/// What a Redis-only call needs, for wrong_backend().
inline constexpr std::string_view needs_redis =
    "a Redis client (redis://, rediss://, unix://, redis-sentinel:// or redis-cluster://)";
/// What a Redlock-only call needs, for wrong_backend().
inline constexpr std::string_view needs_redlock =
    "a Redlock client (redlock://, rediss-redlock:// or redlock_options)";
/// What a ZooKeeper-only call needs, for wrong_backend().
inline constexpr std::string_view needs_zookeeper = "a ZooKeeper client (zk://)";

/// dlock::error(errc::unsupported): "`call` needs `needs`; this client's backend is `name`".
inline error wrong_backend(const client& c, std::string_view call, std::string_view needs) {
    std::string what(call);
    what.append(" needs ").append(needs).append("; this client's backend is ");
    what.append(c.backend_name());
    return {errc::unsupported, what};
}

} // namespace dlock::detail
