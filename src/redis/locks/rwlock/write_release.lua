-- rwlock/write_release.lua: release one write hold of a Redisson RReadWriteLock-compatible lock
-- (Redisson's write unlock, without the unlock latch).
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_rwlock:{N}
-- ARGV[1]  unlock message "1" (Redisson's READ_UNLOCK_MESSAGE: wakes every waiter)
-- ARGV[2]  lease in ms: a re-entrant decrement keeps N's TTL at least this long
-- ARGV[3]  owner "<client-id>:<owner-id>" (the write field is "<owner>:write")
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- Returns  nil  this owner does not hold write (-> errc::not_owner)
--          0    still held (write count decremented)
--          1 + n  the last write hold is released: N is deleted, or, when the owner still holds
--                 read under it, mode becomes read; either way the message is published
--                 (Redisson publishes only on delete; waiting readers may join a read mode too)
--                 and n connections received it (the polite release, ARCHITECTURE.md; one
--                 integer, not {1, n}: a table costs the server about 0.5 us more per release)
-- HLEN before the write: a hash of the mode and this writer alone is deleted whole (the common
-- case: HGET, HGET, HLEN, DEL and the publish); with the owner's read holds in it only the write
-- field goes and mode becomes read. (No HMGET: the least-privileged ACL in README.md lists the
-- commands the scripts call, and a new one would break a deployment that set it.)
local writer = ARGV[3] .. ':write'
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
local held = redis.call('hget', KEYS[1], writer)
if not held then
    return nil
end
local count = tonumber(held) - 1
if count > 0 then
    redis.call('hset', KEYS[1], writer, count)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return 0
end
if redis.call('hlen', KEYS[1]) == 2 then
    redis.call('del', KEYS[1])
else
    redis.call('hdel', KEYS[1], writer)
    redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1 + redis.call(ARGV[4], KEYS[2], ARGV[1])
