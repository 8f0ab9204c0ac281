-- fair/release.lua: release one hold of a fair lock and wake the head of the queue.
-- KEYS[1]  lock key N
-- KEYS[2]  waiter queue redisson_lock_queue:{N}
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel prefix redisson_lock__channel:{N} (the head waits on <prefix>:<owner>)
-- ARGV[1]  unlock message "0"
-- ARGV[2]  lease in ms to reset on a reentrant decrement
-- ARGV[3]  owner field
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- Returns  nil  not held by this owner (-> errc::not_owner; if the lock is free the head is
--               still woken, so an expired holder cannot stall the queue)
--          0    still held (hold count decremented, lease reset)
--          1    released; the head of the queue (if any) was woken on its own channel
-- Redisson's fair unlock answers 1 when N no longer exists; we answer nil, as for RLock: the
-- hold was lost and its owner must hear it.
-- The queue is cleaned first, as on acquisition; an empty queue costs one LINDEX and no TIME.
-- `first` is the head after the cleanup: only KEYS[1] is written below, so it is the head to
-- wake.
local now
local first = redis.call('lindex', KEYS[2], 0)
while first do
    if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline and tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
    first = redis.call('lindex', KEYS[2], 0)
end
local held = redis.call('hget', KEYS[1], ARGV[3])
if held then
    local count = tonumber(held) - 1
    if count > 0 then
        redis.call('hset', KEYS[1], ARGV[3], count)
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 0
    end
    redis.call('del', KEYS[1])
elseif redis.call('exists', KEYS[1]) == 1 then
    return nil
end
if first then redis.call(ARGV[4], KEYS[4] .. ':' .. first, ARGV[1]) end
if held then return 1 end
return nil
