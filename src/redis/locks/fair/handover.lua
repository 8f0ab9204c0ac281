-- fair/handover.lua: the final release of a fair lock by a client that has a waiter of its own
-- on the lock: if that waiter is the head of the queue, the lock passes to it in this script
-- (one round trip instead of a message and an attempt); otherwise the head is woken as
-- fair/release.lua does. The order stays the server's: only the head is ever handed the lock.
-- KEYS[1]  lock key N
-- KEYS[2]  waiter queue redisson_lock_queue:{N}
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel prefix redisson_lock__channel:{N}
-- KEYS[5]  fencing counter redisson_lock_token:{N}
-- ARGV[1]  releasing owner field
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- ARGV[3]  owner field of the releasing client's waiter
-- ARGV[4]  that waiter's lease in milliseconds
-- Returns  nil         not held by the releasing owner (-> errc::not_owner; the head is woken
--                      if the lock is free)
--          {2, token}  handed over: the waiter was the head; N = {ARGV[3]: 1} with its lease
--          1           released; the head (another waiter) was woken on its own channel
-- The releasing owner's field goes whatever its count (see reentrant/handover.lua).
-- The queue is cleaned first, as in fair/release.lua; `head` is the head after the cleanup (only
-- KEYS[1] is touched before it is used).
local now
local head = redis.call('lindex', KEYS[2], 0)
while head do
    if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
    head = redis.call('lindex', KEYS[2], 0)
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    if head and redis.call('exists', KEYS[1]) == 0 then
        redis.call(ARGV[2], KEYS[4] .. ':' .. head, '0')
    end
    return nil
end
redis.call('del', KEYS[1])
if head and head == ARGV[3] then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    local token = redis.call('incr', KEYS[5])
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    return {2, token}
end
if head then redis.call(ARGV[2], KEYS[4] .. ':' .. head, '0') end
return 1
