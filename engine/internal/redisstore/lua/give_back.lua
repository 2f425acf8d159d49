-- giveBackCmd returns the units of bookings that SQL no longer counts (released, cancelled,
-- completed), exactly once each, and leaves tombstones so that a loader that read a booking before
-- the change does not re-add it.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> gone ZSET
-- ARGV[1] -> now ms, ARGV[2] -> tombstone lifetime ms, ARGV[3..] -> owners
-- Output: how many of the owners still held units
local now = tonumber(ARGV[1])
local n = 0
for i = 3, #ARGV do
  n = n + give_back(KEYS[1], KEYS[2], ARGV[i])
  if string.sub(ARGV[i], 1, #OWNER_BOOKING) == OWNER_BOOKING then redis.call('ZADD', KEYS[3], now, ARGV[i]) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))
return n
