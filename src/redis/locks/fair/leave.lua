-- fair/leave.lua: a waiter that gave up (its wait ran out, it was cancelled) leaves the queue at
-- once, and if the lock is free the new head is woken (the leaver may have been woken as the
-- head and not taken the lock).
-- KEYS[1]  lock key N
-- KEYS[2]  waiter queue redisson_lock_queue:{N}
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel prefix redisson_lock__channel:{N}
-- ARGV[1]  owner field of the leaving waiter
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  1 if the waiter was queued, 0 if not
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then redis.call(ARGV[2], KEYS[4] .. ':' .. head, '0') end
end
if removed > 0 then return 1 end
return 0
