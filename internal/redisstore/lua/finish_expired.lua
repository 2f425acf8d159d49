-- finishExpiredCmd writes the records of ended holds EXPIRED (they stay readable for keep ms) and
-- takes them off the ended set. A hold re-taken by a late payment meanwhile is left as it is.
-- KEYS[1] -> ended ZSET, KEYS[2..] -> the holds' HASHes, in the order of ARGV[3..]
-- ARGV[1] -> now ms, ARGV[2] -> keep ms, ARGV[3..] -> hold ids
-- Output: how many records were written EXPIRED now
local now = tonumber(ARGV[1])
local n = 0
for i = 3, #ARGV do
  local h = KEYS[i - 1]
  if redis.call('HGET', h, F_STATUS) == HOLD_HELD and tonumber(redis.call('HGET', h, F_DEADLINE)) <= now then
    redis.call('HSET', h, F_STATUS, HOLD_EXPIRED, F_ENDED, now)
    redis.call('PEXPIRE', h, tonumber(ARGV[2]))
    n = n + 1
  end
  redis.call('ZREM', KEYS[1], ARGV[i])
end
return n
