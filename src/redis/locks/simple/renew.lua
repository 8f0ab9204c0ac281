-- simple/renew.lua: compare-and-pexpire, batched, for simple locks held with the watchdog
-- (also the single-lock extend: one key).
-- KEYS[i]    lock key of the i-th held simple lock
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the token that must still be stored in KEYS[i]
-- Returns    array of integers, one per key: 1 extended, 0 gone or held by another token
local result = {}
for i = 1, #KEYS do
    if redis.call('get', KEYS[i]) == ARGV[i + 1] then
        redis.call('pexpire', KEYS[i], ARGV[1])
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
