// Key-name helpers shared by every lock kind (each kind's layout is in its protocol).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::detail {

/// Redisson's prefixName(p, N): `p:{N}`, or `p:N` when N already contains '{'. Either way the
/// result hashes to N's cluster slot (lock_protocol::keys checks it).
std::string prefix_name(std::string_view prefix, std::string_view name);

/// Redis Cluster hash slot of a key (CRC16/XMODEM of the hash tag or the whole key, mod 16384).
std::uint16_t key_slot(std::string_view key) noexcept;

} // namespace dlock::detail
