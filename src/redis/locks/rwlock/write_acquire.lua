-- rwlock/write_acquire.lua: take or re-enter the write hold of a Redisson RReadWriteLock-compatible
-- lock, with a fencing token; a refused waiting writer announces itself so that new dlock
-- readers wait behind it (writers are not starved by a stream of readers).
-- KEYS[1]  lock key N (HASH, see read_acquire.lua)
-- KEYS[2]  fencing counter dlock_rwlock_token:{N} (STRING, no TTL)
-- KEYS[3]  writer intent marker dlock_rwlock_writer:{N} (STRING = the last announcing owner, PX)
-- ARGV[1]  lease in milliseconds (positive integer)
-- ARGV[2]  owner "<client-id>:<owner-id>"; the write field is "<owner>:write" (Redisson's)
-- ARGV[3]  marker lease in milliseconds; "0": this attempt does not wait (no announcement)
-- Returns  {1, token}  acquired fresh; token = INCR of KEYS[2] (strictly increasing)
--          {2, count}  re-entered by the same owner's writer; count = new write count
--          {3, 0}      refused for good: this owner holds read only (an upgrade would wait for
--                      itself forever; -> errc::invalid_argument)
--          {0, pttl}   held by others; when announcing, pttl is at most half the marker lease
--                      so that the waiter comes back and renews the marker in time
-- The TTL of N is never shortened here: it stays the longest of the holds' leases.
-- Errors   -OOM from INCR before any write.
local writer = ARGV[2] .. ':write'
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    local token = redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], 'mode', 'write', writer, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if redis.call('get', KEYS[3]) == ARGV[2] then
        redis.call('del', KEYS[3])
    end
    return {1, token}
end
if mode == 'write' and redis.call('hexists', KEYS[1], writer) == 1 then
    local count = redis.call('hincrby', KEYS[1], writer, 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {2, count}
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {3, 0}
end
local pttl = redis.call('pttl', KEYS[1])
local marker = tonumber(ARGV[3])
if marker > 0 then
    redis.call('set', KEYS[3], ARGV[2], 'px', marker)
    local back = math.floor(marker / 2)
    if pttl < 0 or pttl > back then
        pttl = back
    end
end
return {0, pttl}
