-- fair/force_unlock.lua: break a fair lock whoever holds it and wake the head of the queue.
-- KEYS[1]  lock key N
-- KEYS[2]  waiter queue redisson_lock_queue:{N}
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel prefix redisson_lock__channel:{N}
-- ARGV[1]  "PUBLISH" or "SPUBLISH"
-- Returns  1 if a lock was deleted, 0 if there was none (the head is woken either way)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline and tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
end
local deleted = redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then redis.call(ARGV[1], KEYS[4] .. ':' .. head, '0') end
return deleted
