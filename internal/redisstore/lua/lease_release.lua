-- leaseReleaseCmd gives up a lease this holder has, so that another instance takes it at once.
-- KEYS[1] -> the lease's key
-- ARGV[1] -> the holder's token
-- Output: 1 if it was released, 0 if the holder did not have it
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
