-- rwlock/read_renew.lua: the watchdog's batched renewal of read holds (Redisson 4.4's ReadLockTask:
-- only this client's readers are renewed, so a crashed client's read holds expire on their own).
-- KEYS[2i-1] lock key N of the i-th hold
-- KEYS[2i]   its key prefix "{N}" (or N when N has a hash tag)
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  owner field of the i-th hold
-- Returns    array of integers, one per hold: 1 renewed (the owner's live timeout keys and N,
--            whose TTL is never shortened), 0 lost (no read field, or every timeout key of the
--            owner expired: another reader's release may then have judged the lock free; while
--            one lives, N outlives it and the owner's field keeps writers out)
local result = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
    local key = KEYS[2 * i - 1]
    local owner = ARGV[i + 1]
    local count = tonumber(redis.call('hget', key, owner))
    local alive = false
    if count ~= nil then
        for c = count, 1, -1 do
            if redis.call('pexpire', KEYS[2 * i] .. ':' .. owner .. ':rwlock_timeout:' .. c, lease) == 1 then
                alive = true
            end
        end
    end
    if alive then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
