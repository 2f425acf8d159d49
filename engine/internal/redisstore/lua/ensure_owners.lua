-- ensureOwnersCmd makes sure occupying bookings' units are counted, once each: by reconciliation
-- (a batch, respecting tombstones, no capacity check: SQL is the truth) and by a restore (one
-- booking, ignoring its tombstone, and only if its units are free).
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> gone ZSET
-- ARGV[1] -> 'restore' | 'repair', then quadruples: booking id, hold id, qty, slot fields comma-joined
-- Output: one answer per booking: 'present' | 'gone' (tombstoned: released meanwhile) |
--         'moved' (from its hold) | 'added' | 'full' | 'closed'
local restore = ARGV[1] == 'restore'
local out = {}
for i = 2, #ARGV, 4 do
  local owner, hold = OWNER_BOOKING .. ARGV[i], OWNER_HOLD .. ARGV[i + 1]
  local answer
  if redis.call('HEXISTS', KEYS[3], owner) == 1 then
    answer = 'present'
  elseif not restore and redis.call('ZSCORE', KEYS[4], owner) then
    answer = 'gone'
  else
    local hv = redis.call('HGET', KEYS[3], hold)
    if hv then
      redis.call('HSET', KEYS[3], owner, hv)
      redis.call('HDEL', KEYS[3], hold)
      answer = 'moved'
    else
      local qty, fields = tonumber(ARGV[i + 2]), split(ARGV[i + 3])
      answer = 'ok'
      if restore then answer = fits(KEYS[1], KEYS[2], qty, fields) end
      if answer == 'ok' then
        take(KEYS[3], KEYS[2], owner, qty, fields)
        redis.call('ZREM', KEYS[4], owner)
        answer = 'added'
      end
    end
  end
  out[#out + 1] = answer
end
return out
