-- lock_handover.lua: the final release of a Redisson-compatible reentrant lock, passing it to a
-- waiter of the same client instead of publishing (a fresh acquisition by that waiter).
-- KEYS[1]  lock key N
-- KEYS[2]  unlock channel redisson_lock__channel:{N}
-- KEYS[3]  fencing counter redisson_lock_token:{N}
-- ARGV[1]  unlock message "0"
-- ARGV[2]  lease in ms to reset if the hold turns out to be reentered (as lock_release.lua)
-- ARGV[3]  releasing owner field
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- ARGV[5]  "NUMSUB" or "SHARDNUMSUB": first check that no other client subscribes to KEYS[2]
--          (a waiter of another process, Redisson's or ours); "" skips the check
-- ARGV[6]  waiting owner field
-- ARGV[7]  waiting owner's lease in milliseconds
-- Returns  nil          not held by the releasing owner (-> errc::not_owner); nothing written
--          0            still held by the releasing owner (hold count decremented, lease reset)
--          1            another client waits: released and published as lock_release.lua does
--          {2, token}   handed over: N = {ARGV[6]: 1} with the waiter's lease; token = INCR of
--                       KEYS[3] (the waiter's fencing token, as for any fresh acquisition)
-- Errors   -OOM from INCR before any write.
local held = redis.call('hget', KEYS[1], ARGV[3])
if not held then
    return nil
end
local count = tonumber(held) - 1
if count > 0 then
    redis.call('hset', KEYS[1], ARGV[3], count)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
if ARGV[5] ~= '' and redis.call('pubsub', ARGV[5], KEYS[2])[2] > 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    return 1
end
local token = redis.call('incr', KEYS[3])
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], ARGV[6], 1)
redis.call('pexpire', KEYS[1], ARGV[7])
return {2, token}
