-- reentrant/renew.lua: the watchdog's batched renewal of reentrant locks (one call per <= 100 locks).
-- KEYS[i]    lock key of the i-th held lock
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  owner field that holds KEYS[i]
-- Returns    array of integers, one per key: 1 renewed, 0 gone or held by another owner (lost)
local result = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
