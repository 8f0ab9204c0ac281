-- simple/release.lua: compare-and-delete release of a simple lock (redis-py Lock layout).
-- KEYS[1]  lock key (STRING holding the owner's token)
-- KEYS[2]  wake-up channel dlock_simple__channel:{N}
-- ARGV[1]  owner token (32 hex chars, 128 random bits)
-- ARGV[2]  "PUBLISH" or "SPUBLISH"
-- Returns  1 + n  deleted and waiters notified; n connections received the message (one
--                 integer, not {1, n}: a table costs the server about 0.5 us more per release)
--          0      absent or held by another token (-> errc::not_owner)
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    return 1 + redis.call(ARGV[2], KEYS[2], '0')
end
return 0
