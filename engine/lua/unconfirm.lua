-- unconfirmCmd undoes markConfirming when the booking's commit failed: the hold goes back on the
-- wheel with its own deadline (a re-taken, already expired hold then expires at the next tick).
-- KEYS[1] -> wheel ZSET, KEYS[2] -> the hold's HASH, KEYS[3] -> confirming ZSET
-- ARGV[1] -> keep ms, ARGV[2] -> now ms
-- Output: 1 if the hold was put back, 0 if it was not CONFIRMING
local h = KEYS[2]
if redis.call('HGET', h, 'status') ~= 'CONFIRMING' then return 0 end
redis.call('ZREM', KEYS[3], redis.call('HGET', h, 'id'))
local deadline = tonumber(redis.call('HGET', h, 'deadline_ms'))
redis.call('HSET', h, 'status', 'HELD')
redis.call('HDEL', h, 'confirming_ms')
redis.call('ZADD', KEYS[1], deadline, redis.call('HGET', h, 'id'))
redis.call('PEXPIRE', h, math.max(deadline - tonumber(ARGV[2]), 0) + tonumber(ARGV[1]))
return 1
