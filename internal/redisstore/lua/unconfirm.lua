-- unconfirmCmd undoes markConfirming when the booking was certainly not committed: the hold goes
-- back on the wheel with its own deadline (a re-taken, already expired hold then expires at once).
-- KEYS[1] -> wheel ZSET, KEYS[2] -> the hold's HASH, KEYS[3] -> confirming ZSET,
-- KEYS[4] -> the user's live holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> keep ms
-- Output: 1 if the hold was put back, 0 if it was not CONFIRMING
local h = KEYS[2]
if redis.call('HGET', h, F_STATUS) ~= HOLD_CONFIRMING then return 0 end
local id = redis.call('HGET', h, F_ID)
local deadline = tonumber(redis.call('HGET', h, F_DEADLINE))
redis.call('ZREM', KEYS[3], id)
redis.call('HSET', h, F_STATUS, HOLD_HELD)
redis.call('HDEL', h, F_SINCE)
redis.call('ZADD', KEYS[1], deadline, id)
if deadline > tonumber(ARGV[1]) then redis.call('ZADD', KEYS[4], deadline, id) end
redis.call('PEXPIRE', h, math.max(deadline - tonumber(ARGV[1]), 0) + tonumber(ARGV[2]))
return 1
