-- unloadDayCmd forgets a resource-day's capacity (its schedule changed) so the next use reloads it.
-- Units taken stay: they belong to owners, not to the day.
-- KEYS[1] -> cap HASH, KEYS[2] -> days SET
-- ARGV[1] -> resource-day, ARGV[2..] -> slot fields of the day
redis.call('SREM', KEYS[2], ARGV[1])
for i = 2, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 1
