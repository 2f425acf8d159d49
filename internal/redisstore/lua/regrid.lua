-- regridCmd switches a resource's Redis state to a new slot grid in one step: the old grid's days are
-- forgotten (they reload from SQL with the new slots) and every counted owner of the resource moves
-- its units onto the new slots, so that no hold ever sees the new slots without the units under them.
-- KEYS[1] -> cap HASH, KEYS[2] -> days SET, KEYS[3] -> owners HASH, KEYS[4] -> used HASH,
-- KEYS[5..] -> the HASHes of the holds among the owners
-- ARGV[1] -> number of resource-days d, ARGV[2 .. 1+d] -> resource-days, ARGV[2+d] -> number of old
-- capacity fields c, then c fields, then triples: owner, new slot fields (comma-joined), index in
-- KEYS of its hold's HASH (0 for a booking)
-- Output: number of owners moved
local d = tonumber(ARGV[1])
for i = 2, 1 + d do redis.call('SREM', KEYS[2], ARGV[i]) end
local c = tonumber(ARGV[2 + d])
for i = 3 + d, 2 + d + c do redis.call('HDEL', KEYS[1], ARGV[i]) end
local moved = 0
for i = 3 + d + c, #ARGV, 3 do
  local owner, fields, hk = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local v = redis.call('HGET', KEYS[3], owner)
  if v then
    local qty, _, ver = units_of(v)
    give_back(KEYS[3], KEYS[4], owner)
    take(KEYS[3], KEYS[4], owner, qty, split(fields), ver)
    moved = moved + 1
  end
  if hk > 0 and redis.call('EXISTS', KEYS[hk]) == 1 then redis.call('HSET', KEYS[hk], F_SLOTS, fields) end
end
return moved
