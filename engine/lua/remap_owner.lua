-- remapOwnerCmd moves an owner's units onto other slot fields (its resource's grid changed), in one
-- step, so that no reader sees them on neither grid. An owner that is not counted stays uncounted:
-- loading its day counts it on the new grid.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> the hold's HASH (for hold owners; any key
-- otherwise)
-- ARGV[1] -> owner, ARGV[2] -> new slot fields, comma-joined, ARGV[3] -> '1' for a hold owner
-- Output: 1 if moved, 0 if the owner was not counted
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local qty = tonumber(string.sub(v, 1, string.find(v, '|', 1, true) - 1))
give_back(KEYS[1], KEYS[2], ARGV[1])
take(KEYS[1], KEYS[2], ARGV[1], qty, split(ARGV[2]))
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HSET', KEYS[3], 'slots', ARGV[2]) end
return 1
