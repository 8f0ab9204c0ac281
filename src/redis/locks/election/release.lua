-- election/release.lua: resign an election (the final release of the election's lock N).
-- KEYS[1]  lock key N
-- KEYS[2]  unlock channel redisson_lock__channel:{N} (campaigns and lock waiters wait on it)
-- KEYS[3]  leader record dlock_election:{N}
-- KEYS[4]  election channel dlock_election__channel:{N}
-- ARGV[1]  owner field
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  nil    not held by this owner (-> errc::not_owner)
--          1 + n  released; n connections received the unlock message
-- A campaign's owner never re-enters, so every release is final. The record goes only if it is
-- this owner's (a stale record of an earlier leader is never current anyway).
if not redis.call('hget', KEYS[1], ARGV[1]) then
    return nil
end
redis.call('del', KEYS[1])
if redis.call('hget', KEYS[3], 'owner') == ARGV[1] then
    redis.call('del', KEYS[3])
    redis.call(ARGV[2], KEYS[4], '0')
end
return 1 + redis.call(ARGV[2], KEYS[2], '0')
