-- cancelHoldCmd gives up a live hold: units back, off the wheel.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> wheel ZSET, KEYS[4] -> the hold's HASH
-- ARGV[1] -> now ms, ARGV[2] -> keep ms, ARGV[3] -> hold key prefix
-- Output: 'cancelled' | 'busy' (being confirmed) | 'missing' | the hold's final status
local now = tonumber(ARGV[1])
expire_due(KEYS[3], KEYS[1], KEYS[2], ARGV[3], now, 1000, tonumber(ARGV[2]))
local h = KEYS[4]
local status = redis.call('HGET', h, 'status')
if not status then return 'missing' end
if status == 'CONFIRMING' then return 'busy' end
if status ~= 'HELD' then return status end
local id = redis.call('HGET', h, 'id')
give_back(KEYS[1], KEYS[2], 'h:' .. id)
redis.call('ZREM', KEYS[3], id)
redis.call('HSET', h, 'status', 'CANCELLED', 'ended_ms', now)
redis.call('PEXPIRE', h, tonumber(ARGV[2]))
return 'cancelled'
