-- markConfirmingCmd is step one of a confirm: the hold leaves the wheel so that it can no longer
-- expire while its booking is committed. A hold that already expired (or was given up, when
-- ARGV[4] allows) re-takes its units if they are still free.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> days SET, KEYS[6] -> the hold's HASH, KEYS[7] -> confirming ZSET (hold id → since ms)
-- ARGV[1] -> now ms, ARGV[2] -> keep ms, ARGV[3] -> hold key prefix, ARGV[4] -> '1' if a cancelled
-- hold may be revived (a payment arrived for it), ARGV[5] -> stale ms (a CONFIRMING older than this
-- was abandoned by a dead process), ARGV[6] -> resource-days of the hold, comma-joined
-- Output: {'ok'} | {'retaken'} | {'confirmed', booking_id} | {'busy'} | {'missing'} |
--         {'gone', 'full'|'closed'} | {'cancelled'} | {'cold', day}
local now = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
expire_due(KEYS[4], KEYS[3], KEYS[2], ARGV[3], now, 1000, keep)
local h = KEYS[6]
local status = redis.call('HGET', h, 'status')
if not status then return {'missing'} end
if status == 'CONFIRMED' then return {'confirmed', redis.call('HGET', h, 'booking_id')} end
if status == 'CONFIRMING' then
  local since = tonumber(redis.call('HGET', h, 'confirming_ms') or '0')
  if now - since < tonumber(ARGV[5]) then return {'busy'} end
  redis.call('HSET', h, 'confirming_ms', now)
  redis.call('ZADD', KEYS[7], now, redis.call('HGET', h, 'id'))
  return {'ok'}
end
if status == 'HELD' then
  redis.call('HSET', h, 'status', 'CONFIRMING', 'confirming_ms', now)
  redis.call('ZREM', KEYS[4], redis.call('HGET', h, 'id'))
  redis.call('ZADD', KEYS[7], now, redis.call('HGET', h, 'id'))
  redis.call('PERSIST', h)
  return {'ok'}
end
if status == 'CANCELLED' and ARGV[4] ~= '1' then return {'cancelled'} end
-- EXPIRED, or CANCELLED with a payment: re-take the units if they are still free.
local missing = days_missing(KEYS[5], split(ARGV[6]))
if missing then return {'cold', missing} end
local qty = tonumber(redis.call('HGET', h, 'qty'))
local fields = split(redis.call('HGET', h, 'slots'))
local verdict = fits(KEYS[1], KEYS[2], qty, fields)
if verdict ~= 'ok' then return {'gone', verdict} end
take(KEYS[3], KEYS[2], 'h:' .. redis.call('HGET', h, 'id'), qty, fields)
redis.call('HSET', h, 'status', 'CONFIRMING', 'confirming_ms', now, 'retaken', '1')
redis.call('ZADD', KEYS[7], now, redis.call('HGET', h, 'id'))
redis.call('PERSIST', h)
return {'retaken'}
