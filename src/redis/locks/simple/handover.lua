-- simple/handover.lua: release a simple lock by passing it to a waiter of the same client.
-- KEYS[1]  lock key (STRING holding the owner's token)
-- KEYS[2]  wake-up channel dlock_simple__channel:{N}
-- ARGV[1]  releasing owner's token
-- ARGV[2]  waiting owner's token (the new value)
-- ARGV[3]  waiting owner's lease in milliseconds
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- ARGV[5]  "NUMSUB" or "SHARDNUMSUB": first check that no other client subscribes to KEYS[2]
--          (a waiter of another process); "" skips the check
-- Returns  2 handed over: KEYS[1] now holds ARGV[2] with the waiter's lease
--          1 another client waits: released and published as simple/release.lua does
--          0 absent or held by another token (-> errc::not_owner); nothing written
if redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 0
end
if ARGV[5] ~= '' and redis.call('pubsub', ARGV[5], KEYS[2])[2] > 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], '0')
    return 1
end
redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3])
return 2
