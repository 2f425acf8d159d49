-- holdSlotsCmd takes qty units of every slot of a physical window for a new hold, all or nothing,
-- and puts the hold's deadline on the wheel.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> ended ZSET, KEYS[6] -> days SET, KEYS[7] -> the new hold's HASH,
-- KEYS[8] -> the user's holds ZSET, KEYS[9] -> the user's live holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> deadline ms, ARGV[3] -> qty, ARGV[4] -> hold id, ARGV[5] -> keep ms,
-- ARGV[6] -> resource-days, comma-joined, ARGV[7] -> slot fields, comma-joined,
-- ARGV[8] -> most live holds the user may have at the venue (0: no limit),
-- ARGV[9..] -> field/value pairs of the hold record
-- Output: {'ok'} | {'cold', day} | {'closed'} | {'full'} | {'limit'}
local now = tonumber(ARGV[1])
local deadline = tonumber(ARGV[2])
local qty = tonumber(ARGV[3])
local id = ARGV[4]
local keep = tonumber(ARGV[5])
expire_due(KEYS[4], KEYS[5], KEYS[3], KEYS[2], now, EXPIRE_BATCH)
local missing = days_missing(KEYS[6], split(ARGV[6]))
if missing then return {'cold', missing} end
local most = tonumber(ARGV[8])
if most > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now)
  if redis.call('ZCARD', KEYS[9]) >= most then return {'limit'} end
end
local fields = split(ARGV[7])
local verdict = fits(KEYS[1], KEYS[2], qty, fields)
if verdict ~= 'ok' then return {verdict} end
take(KEYS[3], KEYS[2], OWNER_HOLD .. id, qty, fields, 0)
local rec = {}
for i = 9, #ARGV do rec[#rec + 1] = ARGV[i] end
redis.call('HSET', KEYS[7], F_STATUS, HOLD_HELD, F_SLOTS, ARGV[7], unpack(rec))
redis.call('PEXPIRE', KEYS[7], deadline - now + keep)
redis.call('ZADD', KEYS[4], deadline, id)
redis.call('ZADD', KEYS[8], now, id)
redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now - keep)
redis.call('PEXPIRE', KEYS[8], deadline - now + keep)
redis.call('ZADD', KEYS[9], deadline, id)
redis.call('PEXPIRE', KEYS[9], deadline - now + 1000)
return {'ok'}
