-- rateLimitCmd counts one request of a client address in the current second.
-- KEYS[1] -> the address's counter of this second
-- ARGV[1] -> how long the counter lives, ms
-- Output: the requests counted this second, this one included
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
