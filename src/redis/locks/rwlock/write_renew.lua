-- rwlock/write_renew.lua: the watchdog's batched renewal of write holds (Redisson's LockTask on the
-- ":write" field).
-- KEYS[i]    lock key N of the i-th hold
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  owner of the i-th hold (the write field is "<owner>:write")
-- Returns    array of integers, one per hold: 1 renewed (N's TTL is never shortened: read holds
--            under the write may have longer leases), 0 gone or held by another owner (lost)
local result = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1] .. ':write') == 1 then
        if redis.call('pttl', KEYS[i]) < lease then
            redis.call('pexpire', KEYS[i], lease)
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
