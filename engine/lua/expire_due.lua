-- expireDueHoldsCmd pops holds whose deadline has come, in a bounded batch, giving units back.
-- KEYS[1] -> wheel ZSET, KEYS[2] -> owners HASH, KEYS[3] -> used HASH
-- ARGV[1] -> now ms, ARGV[2] -> batch limit, ARGV[3] -> keep ms, ARGV[4] -> hold key prefix
-- Output: number of holds expired (== limit means more may be due)
return expire_due(KEYS[1], KEYS[2], KEYS[3], ARGV[4], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
