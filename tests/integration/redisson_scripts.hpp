// Redisson's RLock and RPermitExpirableSemaphore scripts, verbatim (Redisson 3.x,
// ../shared/research/redisson.md §1, peers-beyond-locks.md), run with
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

// RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore.java, Redisson 3.x): N is the
// available count, {N}:timeout a ZSET of permit ids (16 raw bytes) -> expiry in the client's
// epoch ms, redisson_sc:{N} the channel.

/// trySetPermitsAsync: KEYS N, channel; ARGV permits, PUBLISH or SPUBLISH. 1 = set.
inline constexpr std::string_view redisson_semaphore_try_set_permits =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then redis.call('set', KEYS[1], ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1;end;return 0;";

/// tryAcquireAsync(ids, timeoutDate): KEYS N, {N}:timeout, channel; ARGV count, expiry ms, now
/// ms, 922337203685477, PUBLISH or SPUBLISH, ids... 'OK' = acquired, ':<score>' = full with the
/// earliest expiry, nil = full.
inline constexpr std::string_view redisson_semaphore_acquire =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end;end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; "
    "local ttl = redis.call('pttl', KEYS[1]); "
    "if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; return 'OK'; end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end return nil;";

/// tryReleaseAsync(permitId): KEYS N, channel, {N}:timeout; ARGV id, 1, now ms, PUBLISH or
/// SPUBLISH. 1 = released, 0 = not out (or expired: then given back anyway).
inline constexpr std::string_view redisson_semaphore_release =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
    "if tonumber(removed) ~= 1 then return 0;end;"
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then return 0;end;return 1;";

/// availablePermitsAsync: KEYS N, {N}:timeout, channel; ARGV now ms, PUBLISH or SPUBLISH.
inline constexpr std::string_view redisson_semaphore_available =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); "
    "if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then redis.call(ARGV[2], KEYS[3], value); end;return value; end; "
    "local ret = redis.call('get', KEYS[1]); return ret == false and 0 or ret;";

/// An owner as a Java Redisson client writes it: "<connection manager uuid>:<thread id>".
inline constexpr std::string_view java_owner = "9c345276-aa6e-44c1-b478-bf4b14ba1498:805";

} // namespace dlock::test
