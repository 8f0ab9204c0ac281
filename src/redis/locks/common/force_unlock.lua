-- common/force_unlock.lua: break a lock of any kind whoever holds it, and wake waiters.
-- KEYS[1]  lock key N
-- KEYS[2]  the kind's unlock channel (redisson_lock__channel:{N}, dlock_simple__channel:{N})
-- ARGV[1]  unlock message "0"
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  1 if a lock was deleted, 0 if there was none
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
