-- rwlock/read_release.lua: release one read hold of a Redisson RReadWriteLock-compatible lock
-- (Redisson's read unlock, without the unlock latch).
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  this owner's timeout key prefix "{N}:<owner>:rwlock_timeout"
-- KEYS[4]  key prefix "{N}" (or N when N has a hash tag) of every reader's timeout keys
-- KEYS[5]  writer intent marker dlock_rwlock_writer:{N}
-- ARGV[1]  unlock message "0" (Redisson's read unlock: wakes one waiter per client)
-- ARGV[2]  owner field
-- ARGV[3]  "PUBLISH" or "SPUBLISH"
-- Returns  nil  this owner holds no read (-> errc::not_owner)
--          0    this owner still holds read (count decremented)
--          1    this owner's last read hold is released
-- N's TTL becomes the longest remaining read timeout (readers whose timeout keys expired, of a
-- crashed client, no longer count; in write mode it only grows). When no live hold remains N
-- is deleted and the message published: "1" (wake all) instead of "0" while a dlock writer has
-- announced itself, so that the wake-up goes to it and not only to a reader it holds back.
local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
local count = tonumber(held) - 1
if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
else
    redis.call('hset', KEYS[1], ARGV[2], count)
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
local result = 0
if count == 0 then
    result = 1
end
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], field))
        if n then
            for i = n, 1, -1 do
                local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
                longest = math.max(longest, ttl)
            end
        end
    end
    if mode == 'write' then
        if longest > redis.call('pttl', KEYS[1]) then
            redis.call('pexpire', KEYS[1], longest)
        end
        return result
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        return result
    end
end
redis.call('del', KEYS[1])
if redis.call('pttl', KEYS[5]) > 0 then
    redis.call(ARGV[3], KEYS[2], '1')
else
    redis.call(ARGV[3], KEYS[2], ARGV[1])
end
return result
