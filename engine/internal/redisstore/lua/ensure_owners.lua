-- ensureOwnersCmd makes sure occupying bookings' units are counted, once each: by reconciliation
-- (a batch, respecting tombstones, no capacity check: SQL is the truth) and by a restore or a late
-- check-in (one booking, ignoring its tombstone, and only if its units are free).
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> gone ZSET
-- ARGV[1] -> 'restore' | 'repair', then quintuples: booking id, hold id, qty, slot fields
-- comma-joined, the version of the change that takes (or holds) them
-- Output: one answer per booking: 'present' | 'gone' (tombstoned: released meanwhile) |
--         'moved' (from its hold) | 'added' | 'full' | 'closed'
local restore = ARGV[1] == 'restore'
local out = {}
for i = 2, #ARGV, 5 do
  local owner, hold = OWNER_BOOKING .. ARGV[i], OWNER_HOLD .. ARGV[i + 1]
  local qty, fields, ver = tonumber(ARGV[i + 2]), split(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local answer
  if redis.call('HEXISTS', KEYS[3], owner) == 1 then
    retag(KEYS[3], owner, ver)
    answer = 'present'
  elseif not restore and redis.call('ZSCORE', KEYS[4], owner) then
    answer = 'gone'
  else
    local hv = redis.call('HGET', KEYS[3], hold)
    if hv then
      local hq, hf = units_of(hv)
      redis.call('HSET', KEYS[3], owner, units(hq, hf, ver))
      redis.call('HDEL', KEYS[3], hold)
      answer = 'moved'
    else
      answer = 'ok'
      if restore then answer = fits(KEYS[1], KEYS[2], qty, fields) end
      if answer == 'ok' then
        take(KEYS[3], KEYS[2], owner, qty, fields, ver)
        redis.call('ZREM', KEYS[4], owner)
        answer = 'added'
      end
    end
  end
  out[#out + 1] = answer
end
return out
