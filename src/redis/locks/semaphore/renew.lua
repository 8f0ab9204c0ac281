-- semaphore/renew.lua: the watchdog's batched renewal of permits (Redisson's updateLeaseTime,
-- on the server's clock): each permit still out and not expired is re-scored to now + lease.
-- KEYS[i]    {N}:timeout of the i-th permit
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the i-th permit id
-- Returns    array of integers, one per permit: 1 renewed, 0 gone or expired (lost)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result = {}
for i = 1, #KEYS do
    local expiry = redis.call('zscore', KEYS[i], ARGV[i + 1])
    if expiry and tonumber(expiry) > now then
        redis.call('zadd', KEYS[i], now + tonumber(ARGV[1]), ARGV[i + 1])
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
