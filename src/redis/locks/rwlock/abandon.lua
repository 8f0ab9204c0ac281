-- rwlock/abandon.lua: a waiting writer gave up; withdraw its intent marker if it is still its own,
-- and wake the waiters it held back (dlock readers sleep on the marker's PTTL otherwise).
-- KEYS[1]  writer intent marker dlock_rwlock_writer:{N}
-- KEYS[2]  channel redisson_rwlock:{N}
-- ARGV[1]  owner of the writer that gave up
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  1 withdrawn (and "1" published: wakes every waiter), 0 not its marker (another
--          writer announced itself later and still waits) or none
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], '1')
    return 1
end
return 0
