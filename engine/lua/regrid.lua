-- regridCmd switches a resource's Redis state to a new slot grid in one step: the old grid's days are
-- forgotten (they reload from SQL with the new slots) and every counted owner of the resource moves
-- its units onto the new slots, so that no hold ever sees the new slots without the units under them.
-- KEYS[1] -> cap HASH, KEYS[2] -> days SET, KEYS[3] -> owners HASH, KEYS[4] -> used HASH
-- ARGV[1] -> hold key prefix, ARGV[2] -> number of resource-days d, ARGV[3 .. 2+d] -> resource-days,
-- ARGV[3+d] -> number of old capacity fields c, then c fields, then pairs: owner, new slot fields
-- (comma-joined; holds' records get the new fields too)
-- Output: number of owners moved
local d = tonumber(ARGV[2])
for i = 3, 2 + d do redis.call('SREM', KEYS[2], ARGV[i]) end
local c = tonumber(ARGV[3 + d])
for i = 4 + d, 3 + d + c do redis.call('HDEL', KEYS[1], ARGV[i]) end
local moved = 0
for i = 4 + d + c, #ARGV, 2 do
  local owner, fields = ARGV[i], ARGV[i + 1]
  local v = redis.call('HGET', KEYS[3], owner)
  if v then
    local qty = tonumber(string.sub(v, 1, string.find(v, '|', 1, true) - 1))
    give_back(KEYS[3], KEYS[4], owner)
    take(KEYS[3], KEYS[4], owner, qty, split(fields))
    moved = moved + 1
  end
  if string.sub(owner, 1, 2) == 'h:' then
    local hk = ARGV[1] .. string.sub(owner, 3)
    if redis.call('EXISTS', hk) == 1 then redis.call('HSET', hk, 'slots', fields) end
  end
end
return moved
