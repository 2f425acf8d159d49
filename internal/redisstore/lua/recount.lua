-- recountCmd recomputes every slot counter of a venue from its owners and repairs drift, and names
-- the slots whose owners hold more units than the slot has (after Redis lost writes, holds may have
-- been let through on units that bookings own).
-- KEYS[1] -> used HASH, KEYS[2] -> owners HASH, KEYS[3] -> cap HASH
-- Output: {number of slot fields whose counter was wrong, then every field over its capacity}
local want = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local qty, fields = units_of(all[i + 1])
  for _, f in ipairs(fields) do want[f] = (want[f] or 0) + qty end
end
local drift = 0
local seen = {}
local have = redis.call('HGETALL', KEYS[1])
for i = 1, #have, 2 do
  local f, n = have[i], tonumber(have[i + 1])
  local w = want[f] or 0
  seen[f] = true
  if n ~= w then
    drift = drift + 1
    if w == 0 then redis.call('HDEL', KEYS[1], f) else redis.call('HSET', KEYS[1], f, w) end
  end
end
local out = {0}
for f, w in pairs(want) do
  if not seen[f] then
    drift = drift + 1
    redis.call('HSET', KEYS[1], f, w)
  end
  local c = redis.call('HGET', KEYS[3], f)
  if c and w > tonumber(c) then out[#out + 1] = f end
end
out[1] = drift
return out
