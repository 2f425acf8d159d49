-- holdSlotsCmd takes qty units of every slot of a physical window for a new hold, all or nothing,
-- and puts the hold's deadline on the wheel.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> days SET, KEYS[6] -> the new hold's HASH, KEYS[7] -> the user's holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> deadline ms, ARGV[3] -> qty, ARGV[4] -> hold id,
-- ARGV[5] -> keep ms (how long ended records stay), ARGV[6] -> hold key prefix,
-- ARGV[7] -> resource-days, comma-joined, ARGV[8] -> slot fields, comma-joined,
-- ARGV[9..] -> field/value pairs of the hold record
-- Output: {'ok'} | {'cold', day} | {'closed', field} | {'full', field}
local now = tonumber(ARGV[1])
local qty = tonumber(ARGV[3])
local keep = tonumber(ARGV[5])
expire_due(KEYS[4], KEYS[3], KEYS[2], ARGV[6], now, 1000, keep)
local missing = days_missing(KEYS[5], split(ARGV[7]))
if missing then return {'cold', missing} end
local fields = split(ARGV[8])
local verdict = fits(KEYS[1], KEYS[2], qty, fields)
if verdict ~= 'ok' then return {verdict} end
take(KEYS[3], KEYS[2], 'h:' .. ARGV[4], qty, fields)
local rec = {}
for i = 9, #ARGV do rec[#rec + 1] = ARGV[i] end
redis.call('HSET', KEYS[6], 'status', 'HELD', 'slots', ARGV[8], unpack(rec))
redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[2]) - now + keep)
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[7], now, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now - 2 * keep)
redis.call('PEXPIRE', KEYS[7], 2 * keep)
return {'ok'}
