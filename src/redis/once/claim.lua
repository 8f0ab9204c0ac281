-- once/claim.lua: claims the current slot of a period for "run once per period", counted on
-- the server's clock (TIME), so that no client clock decides which slot it is.
-- KEYS[1]  the claim key (dlock-once:{NAME})
-- ARGV[1]  the period in milliseconds
-- ARGV[2]  this claim's token
-- Stores "<slot>:<token>" with PX until the slot's end.
-- Returns  {1 claimed | 0 taken, slot, milliseconds left of the slot}
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period = tonumber(ARGV[1])
local slot = math.floor(now / period)
local left = (slot + 1) * period - now
local held = redis.call('get', KEYS[1])
if held then
    local s = tonumber(string.match(held, '^(%d+):'))
    if s and s >= slot then
        return {0, slot, left}
    end
end
redis.call('set', KEYS[1], string.format('%d:%s', slot, ARGV[2]), 'px', left)
return {1, slot, left}
