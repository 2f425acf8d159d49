-- settleHoldCmd is the last step of a confirm, after the booking is committed: the hold's units
-- become the booking's and the hold record goes (the booking answers for a paid hold from now on).
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> the hold's HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> gone ZSET, KEYS[6] -> confirming ZSET, KEYS[7] -> ended ZSET,
-- KEYS[8] -> the user's holds ZSET, KEYS[9] -> the user's live holds ZSET
-- ARGV[1] -> hold id, ARGV[2] -> booking id, ARGV[3] -> qty, ARGV[4] -> slot fields, comma-joined,
-- ARGV[5] -> the booking's version
-- Output: 'moved' (the hold's units became the booking's) | 'present' (already the booking's) |
--         'added' (the hold's units were lost, e.g. Redis was emptied: taken again for the booking)
local hold, bk = OWNER_HOLD .. ARGV[1], OWNER_BOOKING .. ARGV[2]
local ver = tonumber(ARGV[5])
local out
if redis.call('HEXISTS', KEYS[1], bk) == 1 then
  give_back(KEYS[1], KEYS[2], hold)
  retag(KEYS[1], bk, ver)
  out = 'present'
else
  if move_units(KEYS[1], hold, bk, ver) then
    out = 'moved'
  else
    take(KEYS[1], KEYS[2], bk, tonumber(ARGV[3]), split(ARGV[4]), ver)
    out = 'added'
  end
end
redis.call('ZREM', KEYS[5], bk)
redis.call('DEL', KEYS[3])
for i = 4, 9 do
  if i ~= 5 then redis.call('ZREM', KEYS[i], ARGV[1]) end
end
return out
