-- markConfirmingCmd is step one of a confirm: the hold leaves the wheel so that it can no longer
-- expire while its booking is committed. A hold that expired (or was given up, when ARGV[2] allows)
-- re-takes its units if they are still free.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> ended ZSET, KEYS[6] -> days SET, KEYS[7] -> the hold's HASH, KEYS[8] -> confirming ZSET,
-- KEYS[9] -> the user's live holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> '1' if a cancelled hold may be revived (a payment arrived for it),
-- ARGV[3] -> stale ms (a CONFIRMING older than this was abandoned by a dead process)
-- Output: {'ok'} | {'retaken'} | {'confirmed', booking_id} | {'busy'} | {'missing'} |
--         {'gone', 'full'|'closed'} | {'cancelled'} | {'cold', day}
local now = tonumber(ARGV[1])
expire_due(KEYS[4], KEYS[5], KEYS[3], KEYS[2], now, EXPIRE_BATCH)
local h = KEYS[7]
local status = redis.call('HGET', h, F_STATUS)
if not status then return {'missing'} end
local id = redis.call('HGET', h, F_ID)
if status == HOLD_CONFIRMED then return {'confirmed', redis.call('HGET', h, F_BOOKING_ID)} end
if status == HOLD_CONFIRMING then
  local since = tonumber(redis.call('HGET', h, F_SINCE) or '0')
  if now - since < tonumber(ARGV[3]) then return {'busy'} end
  redis.call('HSET', h, F_SINCE, now)
  redis.call('ZADD', KEYS[8], now, id)
  return {'ok'}
end
if status == HOLD_HELD and tonumber(redis.call('HGET', h, F_DEADLINE)) > now then
  redis.call('HSET', h, F_STATUS, HOLD_CONFIRMING, F_SINCE, now)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[9], id)
  redis.call('ZADD', KEYS[8], now, id)
  redis.call('PERSIST', h)
  return {'ok'}
end
if status == HOLD_CANCELLED and ARGV[2] ~= '1' then return {'cancelled'} end
-- Expired (whether or not the wheel wrote so yet), or cancelled with a payment: re-take the units if
-- they are still free. A due hold beyond expire_due's batch may still own its units: give them back
-- first, so that they are never counted twice.
local missing = days_missing(KEYS[6], split(redis.call('HGET', h, F_DAYS)))
if missing then return {'cold', missing} end
local owner = OWNER_HOLD .. id
give_back(KEYS[3], KEYS[2], owner)
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
redis.call('ZREM', KEYS[9], id)
local qty = tonumber(redis.call('HGET', h, F_QTY))
local fields = split(redis.call('HGET', h, F_SLOTS))
local verdict = fits(KEYS[1], KEYS[2], qty, fields)
if verdict ~= 'ok' then return {'gone', verdict} end
take(KEYS[3], KEYS[2], owner, qty, fields, 0)
redis.call('HSET', h, F_STATUS, HOLD_CONFIRMING, F_SINCE, now, F_RETAKEN, '1')
redis.call('ZADD', KEYS[8], now, id)
redis.call('PERSIST', h)
return {'retaken'}
