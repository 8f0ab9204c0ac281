-- reentrant/handover.lua: the final release of a Redisson-compatible reentrant lock, passing it to a
-- waiter of the same client instead of publishing (a fresh acquisition by that waiter).
-- KEYS[1]  lock key N
-- KEYS[2]  unlock channel redisson_lock__channel:{N}
-- KEYS[3]  fencing counter redisson_lock_token:{N}
-- ARGV[1]  unlock message "0"
-- ARGV[2]  releasing owner field
-- ARGV[3]  "PUBLISH" or "SPUBLISH"
-- ARGV[4]  "NUMSUB" or "SHARDNUMSUB": first check that no other client subscribes to KEYS[2]
--          (a waiter of another process, Redisson's or ours); "" skips the check
-- ARGV[5]  waiting owner field
-- ARGV[6]  waiting owner's lease in milliseconds
-- Returns  nil          not held by the releasing owner (-> errc::not_owner); nothing written
--          1            another client waits: released and published as reentrant/release.lua does
--          {2, token}   handed over: N = {ARGV[5]: 1} with the waiter's lease; token = the INCR
--                       of KEYS[3] (the waiter's fencing token, as for any fresh acquisition)
-- The releasing owner's field goes whatever its count: the client hands over only what it
-- counts as its final hold, and a higher count on the server can only be a re-entry whose
-- reply was lost (its caller was told it failed). An RLock hash has one field, so HDEL of the
-- owner's field deletes N. The checks come before any write, so a script stopped by an error
-- (an ACL without PUBSUB NUMSUB: permission_denied) has changed nothing.
-- Errors   -OOM from INCR, the first write (a skipped counter value is harmless).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
if ARGV[4] ~= '' and redis.call('pubsub', ARGV[4], KEYS[2])[2] > 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return 1
end
local token = redis.call('incr', KEYS[3])
redis.call('hdel', KEYS[1], ARGV[2])
redis.call('hset', KEYS[1], ARGV[5], 1)
redis.call('pexpire', KEYS[1], ARGV[6])
return {2, token}
