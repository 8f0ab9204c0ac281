// Key names of the lock family (Redisson's layout) and their validation.
#pragma once

#include <dlock/client.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail {

/// Redisson's prefixName(p, N): `p:{N}`, or `p:N` when N already contains '{'. Either way the
/// result hashes to N's cluster slot (checked by validate_name()).
std::string prefix_name(std::string_view prefix, std::string_view name);

/// Redis Cluster hash slot of a key (CRC16/XMODEM of the hash tag or the whole key, mod 16384).
std::uint16_t key_slot(std::string_view key) noexcept;

struct lock_keys {
    std::string key;       ///< N
    std::string channel;   ///< unlock channel
    std::string token_key; ///< fencing counter (reentrant only)
};

/// Errors: errc::invalid_argument for an empty name, a name over 4096 bytes, or a name whose
/// companion keys would fall into another cluster slot (an empty hash tag such as "a{}b").
lock_keys make_keys(std::string_view name, lock_kind kind, std::error_code& ec);

} // namespace dlock::detail
