-- rwlock/read_acquire.lua: take or re-enter a read hold of a Redisson RReadWriteLock-compatible lock.
-- KEYS[1]  lock key N (HASH: mode = read|write, "<owner>" -> read count, "<owner>:write" -> write
--          count; Redisson RReadWriteLock layout)
-- KEYS[2]  this owner's timeout key prefix "{N}:<owner>:rwlock_timeout" (hold k lives in
--          "<prefix>:<k>" with a PX lease; N's TTL is kept at the longest of them)
-- KEYS[3]  writer intent marker dlock_rwlock_writer:{N} (STRING, PX; set by waiting dlock writers)
-- ARGV[1]  lease in milliseconds (positive integer)
-- ARGV[2]  owner field "<client-id>:<owner-id>"
-- Returns  {1, 0}      acquired: the owner's first read hold (readers have no fencing token)
--          {2, count}  re-entered: count = the owner's read holds now
--          {0, pttl}   refused: a writer holds N (pttl: N's), or N is not held by this owner
--                      and a dlock writer waits (pttl: the marker's; its release wakes us)
-- Admitted whatever the marker says: a reader that holds already (re-entry) and the writer of
-- N taking read under its write hold; Redisson's own read acquire ignores the marker.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
    return {0, redis.call('pttl', KEYS[1])}
end
if mode ~= 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    local waiting = redis.call('pttl', KEYS[3])
    if waiting > 0 then
        return {0, waiting}
    end
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', ARGV[1])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
if count == 1 then
    return {1, 0}
end
return {2, count}
