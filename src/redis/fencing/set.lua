-- fencing/set.lua: write a resource only with a fencing token at least as new as any seen.
-- KEYS[1]  resource key (STRING)
-- KEYS[2]  highest token accepted for this resource (STRING integer), e.g. "<resource>:fence"
-- ARGV[1]  fencing token of the writer (decimal, positive)
-- ARGV[2]  value to store
-- Returns  1 written; 0 rejected because a newer token has already written (stale holder)
local newest = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < newest then
    return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
