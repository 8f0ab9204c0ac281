// dlock/fencing.hpp: writing a resource only with a fencing token at least as new as any seen.
//
// A lock holder that was paused past its lease (GC, swap, SIGSTOP) may still believe it holds
// the lock; the fencing token (lease::token(), mutex::fencing_token()) lets the resource refuse
// its late write. fenced_set() is that check for a resource kept in Redis itself.
#pragma once

#include <cstdint>
#include <string_view>
#include <system_error>

namespace dlock {

class client;

/// Writes `value` to `key` only if `token` is at least the newest token that wrote `key`
/// before (the newest is kept in `fence_key`; fencing/set.lua does both in one script).
/// Returns false when rejected as stale. Both keys must share a hash slot on a Cluster.
/// Errors: dlock::error for transport failures and error replies; the ec form returns false.
/// Blocking: one round trip. Thread safety: any thread except the client's I/O thread.
///@{
bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value);
bool fenced_set(client& c, std::string_view key, std::string_view fence_key, std::uint64_t token,
                std::string_view value, std::error_code& ec);
///@}

} // namespace dlock
