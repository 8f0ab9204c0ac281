-- election/leader.lua: the current leader of an election (read only).
-- KEYS[1]  lock key N
-- KEYS[2]  leader record dlock_election:{N}
-- Returns  {1, value, epoch, pttl}  the record's owner holds N: it leads; pttl is N's
--          {0, pttl}                 vacant; pttl is N's (-2: free; otherwise N is held by a
--                                    lock of the same name, or by a leader whose record is
--                                    not written yet: never, the grant writes it)
-- A record whose owner no longer holds N (a leader that died: N expired) reads as vacant.
local rec = redis.call('hmget', KEYS[2], 'owner', 'epoch', 'value')
local pttl = redis.call('pttl', KEYS[1])
if rec[1] and redis.call('hexists', KEYS[1], rec[1]) == 1 then
    return {1, rec[3], tonumber(rec[2]), pttl}
end
return {0, pttl}
