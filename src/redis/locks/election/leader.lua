-- election/leader.lua: the current leader of an election (read only).
-- KEYS[1]  lock key N
-- KEYS[2]  leader record dlock_election:{N}
-- Returns  {1, value, epoch, pttl}  the record's owner holds N: it leads; pttl is N's
--          {0, pttl}                 vacant; pttl is N's (-2: free; otherwise N is held by a
--                                    lock of the same name, or by a leader whose record is
--                                    not written yet: never, the grant writes it)
-- A record whose owner no longer holds N (a leader that died: N expired) reads as vacant.
-- HGET, not HMGET: the least-privileged user of README's ACL runs it as it is.
local owner = redis.call('hget', KEYS[2], 'owner')
local pttl = redis.call('pttl', KEYS[1])
if owner and redis.call('hexists', KEYS[1], owner) == 1 then
    local epoch = redis.call('hget', KEYS[2], 'epoch')
    return {1, redis.call('hget', KEYS[2], 'value'), tonumber(epoch), pttl}
end
return {0, pttl}
