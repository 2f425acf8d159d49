-- giveBackCmd returns the units of owners that no longer hold them (bookings released, cancelled or
-- completed in SQL; holds that ended), exactly once each, and tombstones the bookings so that a
-- loader that read one before the change does not re-add it. A booking's units go back only if no
-- later change than the one given took them again.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> gone ZSET
-- ARGV[1] -> now ms, ARGV[2] -> tombstone lifetime ms, then pairs: owner, version of the change that
-- freed it (0: whatever took them)
-- Output: how many of the owners gave units back
local now = tonumber(ARGV[1])
local n = 0
for i = 3, #ARGV, 2 do
  local upto = tonumber(ARGV[i + 1])
  if upto == 0 then upto = nil end
  n = n + give_back(KEYS[1], KEYS[2], ARGV[i], upto)
  if string.sub(ARGV[i], 1, #OWNER_BOOKING) == OWNER_BOOKING then redis.call('ZADD', KEYS[3], now, ARGV[i]) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))
return n
