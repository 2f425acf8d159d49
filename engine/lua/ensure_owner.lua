-- ensureOwnerCmd makes sure an occupying booking's units are counted, once. Used by restore (which
-- must fit), by loading a day, and by reconciliation.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> gone ZSET
-- ARGV[1] -> booking owner, ARGV[2] -> its hold's owner, ARGV[3] -> qty, ARGV[4] -> slot fields,
-- comma-joined, ARGV[5] -> '1' to ignore a tombstone (restore), ARGV[6] -> '1' to check capacity
-- Output: 'present' | 'gone' (tombstoned: released meanwhile) | 'moved' (from its hold) | 'added' |
--         'full' | 'closed'
local owner = ARGV[1]
if redis.call('HEXISTS', KEYS[3], owner) == 1 then return 'present' end
if ARGV[5] ~= '1' and redis.call('ZSCORE', KEYS[4], owner) then return 'gone' end
local hv = redis.call('HGET', KEYS[3], ARGV[2])
if hv then
  redis.call('HSET', KEYS[3], owner, hv)
  redis.call('HDEL', KEYS[3], ARGV[2])
  return 'moved'
end
local qty = tonumber(ARGV[3])
local fields = split(ARGV[4])
if ARGV[6] == '1' then
  local verdict = fits(KEYS[1], KEYS[2], qty, fields)
  if verdict ~= 'ok' then return verdict end
end
take(KEYS[3], KEYS[2], owner, qty, fields)
redis.call('ZREM', KEYS[4], owner)
return 'added'
