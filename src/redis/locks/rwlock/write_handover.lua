-- rwlock/write_handover.lua: the final write release of a Redisson RReadWriteLock-compatible lock,
-- passing the write hold to a waiting writer of the same client instead of publishing (a fresh
-- write acquisition by that waiter, with its fencing token).
-- KEYS[1]  lock key N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  fencing counter dlock_rwlock_token:{N}
-- KEYS[4]  writer intent marker dlock_rwlock_writer:{N}
-- ARGV[1]  unlock message "1" (as write_release.lua)
-- ARGV[2]  releasing owner "<client-id>:<owner-id>" (the write field is "<owner>:write")
-- ARGV[3]  "PUBLISH" or "SPUBLISH"
-- ARGV[4]  "NUMSUB" or "SHARDNUMSUB": first check that no other client subscribes to KEYS[2]
--          (a waiting reader or writer of another process, Redisson's or ours); "" skips it
-- ARGV[5]  waiting owner "<client-id>:<owner-id>"
-- ARGV[6]  waiting owner's lease in milliseconds
-- Returns  nil          this owner does not hold write (-> errc::not_owner); nothing changed
--          1            released and published as write_release.lua's final release does:
--                       another client waits, or the releasing owner still holds read under
--                       its write hold (mode becomes read; a writer could not take it)
--          {2, token}   handed over: N = {mode: write, "<ARGV[5]>:write": 1} with the waiter's
--                       lease; token = the INCR of KEYS[3]; the waiter's own intent marker, if
--                       it is the last one announced, is withdrawn as write_acquire.lua does
-- The releasing owner's write field goes whatever its count: the client hands over only what it
-- counts as its final hold (a higher count on the server can only be a re-entry whose reply was
-- lost). Reads come first, so nothing is written before a refusal.
-- Errors   -OOM from INCR, the first write (a skipped counter value is harmless).
local writer = ARGV[2] .. ':write'
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], writer) == 0 then
    return nil
end
local alone = redis.call('hlen', KEYS[1]) == 2
if not alone or (ARGV[4] ~= '' and redis.call('pubsub', ARGV[4], KEYS[2])[2] > 1) then
    if alone then
        redis.call('del', KEYS[1])
    else
        redis.call('hdel', KEYS[1], writer)
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return 1
end
local token = redis.call('incr', KEYS[3])
redis.call('hdel', KEYS[1], writer)
redis.call('hset', KEYS[1], ARGV[5] .. ':write', 1)
redis.call('pexpire', KEYS[1], ARGV[6])
if redis.call('get', KEYS[4]) == ARGV[5] then
    redis.call('del', KEYS[4])
end
return {2, token}
