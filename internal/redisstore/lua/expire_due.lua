-- expireDueHoldsCmd is the wheel's tick for one venue: due holds give their units back, in a bounded
-- batch, and move to the ended set.
-- KEYS[1] -> wheel ZSET, KEYS[2] -> ended ZSET, KEYS[3] -> owners HASH, KEYS[4] -> used HASH
-- ARGV[1] -> now ms, ARGV[2] -> batch limit
-- Output: {holds expired (== limit means more may be due), earliest remaining deadline ms or -1}
local n = expire_due(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next = -1
if #first > 0 then next = tonumber(first[2]) end
return {n, next}
