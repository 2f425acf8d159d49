-- endMoveCmd ends a booking's move: 'finish' (MySQL committed it) leaves the booking holding exactly
-- the new window — its old units and the move's own come back, and the new window's are taken at
-- the move's version — and 'abort' (MySQL did not) gives the move's own units back, so the booking
-- holds exactly its old window. A booking that no longer holds units (cancelled right after the
-- move) keeps none.
-- KEYS[1] -> owners HASH, KEYS[2] -> used HASH, KEYS[3] -> moves HASH
-- ARGV[1] -> booking id, ARGV[2] -> 'finish' | 'abort', ARGV[3] -> the move's version (0: any)
-- Output: 'none' (no such move) | 'finished' | 'aborted' | 'gone' (finished, the booking holds nothing)
local id = ARGV[1]
local mv = redis.call('HGET', KEYS[3], id)
if not mv then return 'none' end
local parts = {}
for p in string.gmatch(mv, '[^' .. UNITS_SEP .. ']+') do parts[#parts + 1] = p end
local ver, qty, fields = tonumber(parts[1]), tonumber(parts[2]), split(parts[3])
if tonumber(ARGV[3]) ~= 0 and tonumber(ARGV[3]) ~= ver then return 'none' end
local bk = OWNER_BOOKING .. id
give_back(KEYS[1], KEYS[2], OWNER_MOVE .. id)
redis.call('HDEL', KEYS[3], id)
if ARGV[2] ~= 'finish' then return 'aborted' end
if redis.call('HEXISTS', KEYS[1], bk) == 0 then return 'gone' end
give_back(KEYS[1], KEYS[2], bk)
take(KEYS[1], KEYS[2], bk, qty, fields, ver)
return 'finished'
