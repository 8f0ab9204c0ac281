-- semaphore/force_unlock.lua: take every permit back from its holder (an operator's tool).
-- KEYS[1]  N (available permits)
-- KEYS[2]  redisson_sc:{N}
-- KEYS[3]  {N}:timeout
-- ARGV[1]  "PUBLISH" or "SPUBLISH"
-- Returns  1 permits were out (now free, waiters told); 0 none was
local n = redis.call('zcard', KEYS[3])
if n == 0 then return 0 end
redis.call('del', KEYS[3])
redis.call(ARGV[1], KEYS[2], redis.call('incrby', KEYS[1], n))
return 1
