-- bumpVersionCmd moves a catalog version on by one, or starts it at ARGV[1] (an epoch) when Redis
-- has none (a first change, or after a loss).
-- KEYS[1] -> the version STRING
-- ARGV[1] -> the epoch to start from
-- Output: the new version
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCR', KEYS[1])
end
redis.call('SET', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
