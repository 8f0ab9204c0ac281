-- reentrant/acquire.lua: take or re-enter a Redisson-compatible reentrant lock, with a fencing token.
-- KEYS[1]  lock key N (HASH owner-field -> hold count, Redisson RLock layout)
-- KEYS[2]  fencing counter redisson_lock_token:{N} (STRING, no TTL; Redisson RFencedLock layout)
-- ARGV[1]  lease in milliseconds (positive integer)
-- ARGV[2]  owner field "<client-id>:<thread-id>"
-- Returns  {1, token}  acquired fresh; token = INCR of KEYS[2] (strictly increasing)
--          {2, count}  re-entered by the same owner; count = new hold count
--          {0, pttl}   held by another owner; pttl = remaining ms (-1: key has no TTL)
-- Errors   -OOM from INCR before any write (INCR is the first write so nothing is half done).
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, count}
end
return {0, redis.call('pttl', KEYS[1])}
