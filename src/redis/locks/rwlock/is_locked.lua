-- rwlock/is_locked.lua: Redisson's isLocked of either side of a read-write lock.
-- KEYS[1]  lock key N
-- ARGV[1]  "read": held in read mode, or in write mode with read holds under it;
--          "write": held in write mode
-- Returns  1 locked as asked, 0 not
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] == 'write' then
    if mode == 'write' then
        return 1
    end
    return 0
end
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
