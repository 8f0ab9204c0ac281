-- election/acquire.lua: one attempt to lead an election on Redis (dlock's own layout; no
-- incumbent client has one). Leading is holding the election's lock N, Redisson RLock's hash,
-- so an election and a lock of one name exclude each other; the grant records the new leader in
-- the same call, so no reader ever sees a granted leader with an older leader's value.
-- KEYS[1]  lock key N (HASH owner-field -> hold count, Redisson RLock layout)
-- KEYS[2]  fencing counter redisson_lock_token:{N}: the epoch (INCR, strictly increasing)
-- KEYS[3]  leader record dlock_election:{N} (HASH owner, epoch, value; no TTL: it is current
--          only while its owner holds N, see leader.lua)
-- KEYS[4]  election channel dlock_election__channel:{N} (observers)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-id>:<handle-id>"
-- ARGV[3]  the leader's value (any bytes)
-- ARGV[4]  "PUBLISH" or "SPUBLISH"
-- Returns  {1, epoch}  elected (the record written, observers told)
--          {0, pttl}   N is held; pttl = its remaining ms (-1: no TTL). Never by this owner:
--                      every campaign has a fresh owner field, so there is no re-entry here.
-- Errors   -OOM from INCR before any write (INCR is the first write so nothing is half done).
if redis.call('exists', KEYS[1]) == 0 then
    local epoch = redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('hset', KEYS[3], 'owner', ARGV[2], 'epoch', epoch, 'value', ARGV[3])
    redis.call(ARGV[4], KEYS[4], epoch)
    return {1, epoch}
end
return {0, redis.call('pttl', KEYS[1])}
