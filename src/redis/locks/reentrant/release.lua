-- reentrant/release.lua: release one hold of a Redisson-compatible reentrant lock.
-- KEYS[1]  lock key N
-- KEYS[2]  unlock channel redisson_lock__channel:{N}
-- KEYS[3]  optional unlock latch redisson_unlock_latch:{N}:<request-id> (makes a retry idempotent)
-- ARGV[1]  unlock message "0" (wakes one waiter per client)
-- ARGV[2]  lease in ms to reset on a reentrant decrement (Redisson resets the TTL to the lease)
-- ARGV[3]  owner field
-- ARGV[4]  "PUBLISH" or "SPUBLISH" (sharded pub/sub on Redis 7 Cluster, as Redisson does)
-- ARGV[5]  latch TTL in ms (only read when KEYS[3] is given)
-- Returns  nil  not held by this owner (-> errc::not_owner)
--          0    still held (hold count decremented, lease reset)
--          1 + n  released; the unlock message was published and n connections received it
--                 (other clients' waiters, and this client's subscriber if it listens: the
--                 releasing client then gives those waiters a head start, see
--                 ARCHITECTURE.md "Polite release"). One integer, not {1, n}: a table costs
--                 the server about 0.5 us more per release.
--          1      also a retried request answered from the latch (released, no count)
if KEYS[3] then
    local done = redis.call('get', KEYS[3])
    if done then return tonumber(done) end
end
-- HGET instead of Redisson's HEXISTS + HINCRBY: the final release (the common case) then costs
-- three calls (HGET, DEL, PUBLISH) instead of four; the data written is the same.
local held = redis.call('hget', KEYS[1], ARGV[3])
if not held then
    return nil
end
local count = tonumber(held) - 1
if count > 0 then
    redis.call('hset', KEYS[1], ARGV[3], count)
    redis.call('pexpire', KEYS[1], ARGV[2])
    if KEYS[3] then redis.call('set', KEYS[3], 0, 'px', ARGV[5]) end
    return 0
end
redis.call('del', KEYS[1])
local receivers = redis.call(ARGV[4], KEYS[2], ARGV[1])
if KEYS[3] then redis.call('set', KEYS[3], 1, 'px', ARGV[5]) end
return 1 + receivers
