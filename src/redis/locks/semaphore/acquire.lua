-- semaphore/acquire.lua: take one permit of a semaphore in Redisson RPermitExpirableSemaphore's
-- layout (so Redisson and dlock share one semaphore), scored on the server's clock, with a
-- fencing token.
-- KEYS[1]  N: the available permits (STRING); set to ARGV[1] minus the permits out when missing
-- KEYS[2]  {N}:timeout: ZSET permit id -> expiry in ms since the epoch
-- KEYS[3]  redisson_sc:{N}: the channel; permits coming back publish the available count
-- KEYS[4]  dlock_semaphore_token:{N}: the fencing counter (dlock's; Redisson has none)
-- ARGV[1]  the semaphore's size (the permits of a fresh semaphore)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the permit id (16 random bytes, as Redisson sends its ids)
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- Returns  {1, token}  acquired
--          {0, ms}     no permit free; ms until the earliest permit expires (-1: none expires)
-- Expired permits (a holder that died, or stopped renewing) are reclaimed first, as Redisson's
-- acquire does; "now" is the server's TIME, never a client's clock.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, 100)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if value > 0 then redis.call(ARGV[4], KEYS[3], value) end
end
local available = redis.call('get', KEYS[1])
if not available then
    available = math.max(0, tonumber(ARGV[1]) - redis.call('zcard', KEYS[2]))
    redis.call('set', KEYS[1], available)
end
if tonumber(available) >= 1 then
    local token = redis.call('incr', KEYS[4])
    redis.call('decr', KEYS[1])
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
    return {1, token}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
-- 922337203685477: Redisson's score of a permit without a lease.
if first[1] and tonumber(first[2]) < 922337203685477 then
    return {0, math.max(0, tonumber(first[2]) - now)}
end
return {0, -1}
