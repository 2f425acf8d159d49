-- recountCmd recomputes every slot counter of a venue from its owners and repairs drift.
-- KEYS[1] -> used HASH, KEYS[2] -> owners HASH
-- Output: number of slot fields whose counter was wrong
local want = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local qty, fields = units_of(all[i + 1])
  for _, f in ipairs(fields) do want[f] = (want[f] or 0) + qty end
end
local drift = 0
local have = redis.call('HGETALL', KEYS[1])
for i = 1, #have, 2 do
  local f, n = have[i], tonumber(have[i + 1])
  local w = want[f] or 0
  if n ~= w then
    drift = drift + 1
    if w == 0 then redis.call('HDEL', KEYS[1], f) else redis.call('HSET', KEYS[1], f, w) end
  end
  want[f] = nil
end
for f, w in pairs(want) do
  drift = drift + 1
  redis.call('HSET', KEYS[1], f, w)
end
return drift
