-- giveBackCmd returns a booking's units after it was released or cancelled in SQL, exactly once, and
-- leaves a tombstone so that a loader that read the booking before the change does not re-add it.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> gone ZSET
-- ARGV[1] -> booking owner, ARGV[2] -> now ms, ARGV[3] -> tombstone lifetime ms
-- Output: 1 if units came back, 0 if they were already back
local n = give_back(KEYS[1], KEYS[2], ARGV[1])
local now = tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[3]))
return n
