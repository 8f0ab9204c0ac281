-- semaphore/release.lua: give one permit back.
-- KEYS[1]  N (available permits)
-- KEYS[2]  redisson_sc:{N}
-- KEYS[3]  {N}:timeout
-- ARGV[1]  the permit id
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  nil    the permit is not out (never was, or reclaimed after it expired), or it had
--                 expired (then it is given back here, but its holder had lost it: not_owner)
--          1 + n  released; the available count was published to n connections
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if not expiry then return nil end
redis.call('zrem', KEYS[3], ARGV[1])
local value = redis.call('incrby', KEYS[1], 1)
local receivers = redis.call(ARGV[2], KEYS[2], value)
if tonumber(expiry) <= now then return nil end
return 1 + receivers
