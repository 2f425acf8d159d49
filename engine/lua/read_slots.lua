-- readSlotsCmd answers availability: capacity and units taken of each field, after expiring due holds.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET, KEYS[5] -> days SET
-- ARGV[1] -> now ms, ARGV[2] -> keep ms, ARGV[3] -> hold key prefix, ARGV[4] -> resource-days,
-- comma-joined, ARGV[5..] -> slot fields
-- Output: {'cold', day} | {'ok', caps[], used[]} (a missing capacity is false: closed)
expire_due(KEYS[4], KEYS[3], KEYS[2], ARGV[3], tonumber(ARGV[1]), 1000, tonumber(ARGV[2]))
local missing = days_missing(KEYS[5], split(ARGV[4]))
if missing then return {'cold', missing} end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields == 0 then return {'ok', {}, {}} end
return {'ok', redis.call('HMGET', KEYS[1], unpack(fields)), redis.call('HMGET', KEYS[2], unpack(fields))}
