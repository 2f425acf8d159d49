-- leaseHoldCmd takes a lease that is free, or renews one this holder already has.
-- KEYS[1] -> the lease's key
-- ARGV[1] -> the holder's token, ARGV[2] -> how long the lease lasts, ms
-- Output: 1 if the holder has the lease now, 0 if another holds it
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
