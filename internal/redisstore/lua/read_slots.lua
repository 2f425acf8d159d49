-- readSlotsCmd answers availability: capacity and units taken of each field, after expiring due holds.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> ended ZSET, KEYS[6] -> days SET
-- ARGV[1] -> now ms, ARGV[2] -> resource-days, comma-joined, ARGV[3..] -> slot fields
-- Output: {'cold', day} | {'ok', caps[], used[]} (a missing capacity is false: closed)
expire_due(KEYS[4], KEYS[5], KEYS[3], KEYS[2], tonumber(ARGV[1]), EXPIRE_BATCH)
local missing = days_missing(KEYS[6], split(ARGV[2]))
if missing then return {'cold', missing} end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields == 0 then return {'ok', {}, {}} end
return {'ok', redis.call('HMGET', KEYS[1], unpack(fields)), redis.call('HMGET', KEYS[2], unpack(fields))}
