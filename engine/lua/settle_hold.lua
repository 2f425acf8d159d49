-- settleHoldCmd is the last step of a confirm, after the booking is committed: the hold's units
-- become the booking's, and the hold record ends.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> the hold's HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> gone ZSET, KEYS[6] -> confirming ZSET
-- ARGV[1] -> hold owner, ARGV[2] -> booking owner, ARGV[3] -> booking id, ARGV[4] -> now ms,
-- ARGV[5] -> keep ms, ARGV[6] -> qty, ARGV[7] -> slot fields, comma-joined
-- Output: 'moved' (hold units became the booking's) | 'present' (already the booking's) |
--         'added' (the hold's units were lost, e.g. Redis was emptied: taken again for the booking)
local out
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  give_back(KEYS[1], KEYS[2], ARGV[1])
  out = 'present'
else
  local v = redis.call('HGET', KEYS[1], ARGV[1])
  if v then
    redis.call('HSET', KEYS[1], ARGV[2], v)
    redis.call('HDEL', KEYS[1], ARGV[1])
    out = 'moved'
  else
    take(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[6]), split(ARGV[7]))
    out = 'added'
  end
end
redis.call('ZREM', KEYS[5], ARGV[2])
local id = redis.call('HGET', KEYS[3], 'id')
if id then
  redis.call('HSET', KEYS[3], 'status', 'CONFIRMED', 'booking_id', ARGV[3], 'ended_ms', ARGV[4])
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[5]))
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[6], id)
end
return out
