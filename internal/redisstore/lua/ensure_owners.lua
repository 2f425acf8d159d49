-- ensureOwnersCmd makes sure occupying bookings' units are counted, once each: by reconciliation
-- (a batch, respecting tombstones, no capacity check: SQL is the truth) and by a restore or a late
-- check-in (one booking, ignoring its tombstone, and only if its units are free).
-- A repair also corrects a booking counted on other slots than SQL says (a move whose end was
-- lost), unless a move of it is under way.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> gone ZSET,
-- KEYS[5] -> moves HASH
-- ARGV[1] -> 'restore' | 'repair', then quintuples: booking id, hold id, qty, slot fields
-- comma-joined, the version of the change that takes (or holds) them
-- Output: one answer per booking: 'present' | 'gone' (tombstoned: released meanwhile) |
--         'moved' (from its hold) | 'added' | 'replaced' (counted again on SQL's slots) | 'full' | 'closed'
local restore = ARGV[1] == 'restore'
local out = {}
for i = 2, #ARGV, 5 do
  local owner, hold = OWNER_BOOKING .. ARGV[i], OWNER_HOLD .. ARGV[i + 1]
  local qty, fields, ver = tonumber(ARGV[i + 2]), split(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local answer
  local cur = redis.call('HGET', KEYS[3], owner)
  if cur then
    local cq, cf = units_of(cur)
    if not restore and (cq ~= qty or table.concat(cf, LIST_SEP) ~= ARGV[i + 3])
        and redis.call('HEXISTS', KEYS[5], ARGV[i]) == 0 then
      give_back(KEYS[3], KEYS[2], owner)
      take(KEYS[3], KEYS[2], owner, qty, fields, ver)
      answer = 'replaced'
    else
      retag(KEYS[3], owner, ver)
      answer = 'present'
    end
  elseif not restore and redis.call('ZSCORE', KEYS[4], owner) then
    answer = 'gone'
  else
    if move_units(KEYS[3], hold, owner, ver) then
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
