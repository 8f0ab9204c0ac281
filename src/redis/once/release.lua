-- once/release.lua: gives a claimed slot back (a failed run), only if the claim is still ours.
-- KEYS[1]  the claim key (dlock-once:{NAME})
-- ARGV[1]  "<slot>:<token>" as claimed
-- Returns  1 deleted, 0 not ours (the slot ended, or another claim holds it)
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
