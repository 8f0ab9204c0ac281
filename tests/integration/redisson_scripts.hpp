// Redisson's RLock scripts, verbatim (Redisson 3.x, ../shared/research/redisson.md §1), run with
// EVAL as "another client" by the interop tests, and the owner id a Java client would use.
#pragma once

#include <string_view>

namespace dlock::test {

/// tryLockInnerAsync: KEYS[1] N; ARGV[1] lease ms, ARGV[2] owner. nil = acquired, else PTTL.
inline constexpr std::string_view redisson_try_lock =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";

/// unlockInnerAsync: KEYS N, channel, unlock latch; ARGV message, lease, owner, PUBLISH or
/// SPUBLISH, latch ms. 1 = released (published), 0 = still held, nil = not the owner.
inline constexpr std::string_view redisson_unlock =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

/// An owner as a Java Redisson client writes it: "<connection manager uuid>:<thread id>".
inline constexpr std::string_view java_owner = "9c345276-aa6e-44c1-b478-bf4b14ba1498:805";

} // namespace dlock::test
