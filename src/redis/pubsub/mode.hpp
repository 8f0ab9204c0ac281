// pubsub/mode.hpp: the words the lock protocols and the subscriber share: whom an unlock
// message wakes (a kind's wake rule), and classic or sharded Pub/Sub with its command names.
// No state; the channel table (channel_table.hpp) and the protocols (locks/protocol.hpp) both
// include it, so a protocol does not depend on the table.
#pragma once

#include <string_view>

namespace dlock::pubsub {

/// Whom an unlock message wakes.
enum class wake { one, all, none };
/// A lock kind's reading of the payload of its unlock message.
using wake_rule = wake (*)(std::string_view payload) noexcept;

/// Classic PUBLISH/SUBSCRIBE, or sharded SPUBLISH/SSUBSCRIBE (Redis 7 Cluster).
enum class mode { classic, sharded };
inline std::string_view publish_command(mode m) noexcept {
    return m == mode::sharded ? "SPUBLISH" : "PUBLISH";
}
inline std::string_view numsub_command(mode m) noexcept {
    return m == mode::sharded ? "SHARDNUMSUB" : "NUMSUB";
}
inline std::string_view subscribe_command(mode m) noexcept {
    return m == mode::sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
}
inline std::string_view unsubscribe_command(mode m) noexcept {
    return m == mode::sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
}

} // namespace dlock::pubsub
