-- fair/acquire.lua: take, re-enter or queue for a Redisson RFairLock-compatible fair lock.
-- KEYS[1]  lock key N (HASH owner-field -> hold count, the RLock layout)
-- KEYS[2]  waiter queue redisson_lock_queue:{N} (LIST of owner fields, arrival order)
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{N} (ZSET owner field -> epoch ms)
-- KEYS[4]  fencing counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-id>:<owner-id>"
-- ARGV[3]  place timeout in ms: a queued waiter keeps its place this long after its last
--          attempt (a killed waiter is dropped after it)
-- ARGV[4]  "1": join the queue when refused (a waiting acquisition); "0": try once, never queue
-- Returns  {1, token}  acquired fresh (the queue's head, or the queue was empty)
--          {2, count}  re-entered by the same owner
--          {0, retry}  refused; retry = ms after which to try again without a message: the
--                      holder's PTTL (a lease that runs out publishes nothing), or, while the
--                      lock is free for another head, 1/64 of ARGV[3]; at most a third of
--                      ARGV[3] so a live waiter refreshes its place in time
-- Deadlines come from the server's clock (TIME), never the client's: Redisson's scripts take
-- them from the calling client's wall clock, so a clock jump on one client could drop or keep
-- the others' places. The scores stay epoch milliseconds, which Redisson's scripts read.
-- Unlike Redisson, an acquisition does not lower the other waiters' deadlines: each of ours
-- refreshes its own place on every attempt (a Redisson waiter's deadline is a later bound).
-- The queue is cleaned first: heads whose place ran out are dropped. An empty queue (no waiter:
-- the common, uncontended case) costs one LINDEX and no TIME; `first` is the head after the
-- cleanup, read again by nothing below (only KEYS[1] is read or written before the queue is).
local now
local function clock()
    if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    return now
end
local first = redis.call('lindex', KEYS[2], 0)
while first do
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline and tonumber(deadline) > clock() then break end
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
    first = redis.call('lindex', KEYS[2], 0)
end
if redis.call('exists', KEYS[1]) == 0 then
    if not first or first == ARGV[2] then
        if first then redis.call('lpop', KEYS[2]) end
        redis.call('zrem', KEYS[3], ARGV[2])
        local token = redis.call('incr', KEYS[4])
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, token}
    end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, count}
end
local place = tonumber(ARGV[3])
local refresh = math.max(1, math.floor(place / 3))
local retry = redis.call('pttl', KEYS[1])
if retry <= 0 then
    -- Free, and another waiter is the head: a live head takes it within moments (it was woken,
    -- or its timer ran out with the holder's lease), a dead one is dropped when its place
    -- expires. Look again soon, but not in a loop: every 1/64 of the place timeout.
    local deadline = first and redis.call('zscore', KEYS[3], first)
    retry = math.max(2, math.floor(place / 64))
    if deadline then retry = math.min(retry, tonumber(deadline) - clock() + 1) end
end
if ARGV[4] == '1' then
    if redis.call('zadd', KEYS[3], clock() + place, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
end
if retry <= 0 or retry > refresh then retry = refresh end
return {0, retry}
