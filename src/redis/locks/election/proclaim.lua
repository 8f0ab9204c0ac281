-- election/proclaim.lua: a leader's new value, without a new election (the epoch stays).
-- KEYS[1]  lock key N
-- KEYS[2]  leader record dlock_election:{N}
-- KEYS[3]  election channel dlock_election__channel:{N}
-- ARGV[1]  owner field of the leader
-- ARGV[2]  the new value
-- ARGV[3]  "PUBLISH" or "SPUBLISH"
-- Returns  1 set and published; 0 this owner does not lead (lost or resigned)
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 or redis.call('hget', KEYS[2], 'owner') ~= ARGV[1] then
    return 0
end
redis.call('hset', KEYS[2], 'value', ARGV[2])
redis.call(ARGV[3], KEYS[3], '1')
return 1
