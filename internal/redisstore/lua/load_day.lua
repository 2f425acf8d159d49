-- loadDayCmd fills a cold resource-day from SQL: its slots' capacity and the units of the bookings
-- that occupy it, in one step, so that no hold can ever see the capacity without the bookings.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> gone ZSET,
-- KEYS[5] -> days SET
-- ARGV[1] -> resource-day, ARGV[2] -> number of slots n, ARGV[3 .. 2+2n] -> field/capacity pairs,
-- then quadruples: booking id, qty, slot fields comma-joined, booking version
-- Output: 1 if loaded now, 0 if it already was
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then return 0 end
local n = tonumber(ARGV[2])
for i = 3, 2 + 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
for i = 3 + 2 * n, #ARGV, 4 do
  local owner = OWNER_BOOKING .. ARGV[i]
  if redis.call('HEXISTS', KEYS[3], owner) == 0 and not redis.call('ZSCORE', KEYS[4], owner) then
    take(KEYS[3], KEYS[2], owner, tonumber(ARGV[i + 1]), split(ARGV[i + 2]), tonumber(ARGV[i + 3]))
  end
end
redis.call('SADD', KEYS[5], ARGV[1])
return 1
