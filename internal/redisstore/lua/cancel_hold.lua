-- cancelHoldCmd gives up a live hold: units back, off the wheel.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> wheel ZSET, KEYS[4] -> ended ZSET,
-- KEYS[5] -> the hold's HASH, KEYS[6] -> the user's live holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> keep ms
-- Output: 'cancelled' | 'busy' (being confirmed) | 'missing' | the hold's effective status
local now = tonumber(ARGV[1])
expire_due(KEYS[3], KEYS[4], KEYS[1], KEYS[2], now, EXPIRE_BATCH)
local h = KEYS[5]
local status = redis.call('HGET', h, F_STATUS)
if not status then return 'missing' end
if status == HOLD_CONFIRMING then return 'busy' end
if status == HOLD_HELD and tonumber(redis.call('HGET', h, F_DEADLINE)) <= now then return HOLD_EXPIRED end
if status ~= HOLD_HELD then return status end
local id = redis.call('HGET', h, F_ID)
give_back(KEYS[1], KEYS[2], OWNER_HOLD .. id)
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[6], id)
redis.call('HSET', h, F_STATUS, HOLD_CANCELLED, F_ENDED, now)
redis.call('PEXPIRE', h, tonumber(ARGV[2]))
return 'cancelled'
