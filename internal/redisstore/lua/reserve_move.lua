-- reserveMoveCmd is step one of a booking's move to another window (a reschedule): the units the new
-- window needs beyond what the booking already holds are taken, all or nothing, by the move's own
-- owner, and the move is recorded. Until the move is finished (the booking then holds exactly the
-- new window) or aborted (exactly the old one), the booking's old units stay taken: a move MySQL
-- refuses can always fall back, and no slot is ever counted over its capacity.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> moves HASH,
-- KEYS[5] -> wheel ZSET, KEYS[6] -> ended ZSET, KEYS[7] -> days SET
-- ARGV[1] -> now ms, ARGV[2] -> booking id, ARGV[3] -> qty, ARGV[4] -> the new window's slot fields,
-- comma-joined, ARGV[5] -> their resource-days, comma-joined, ARGV[6] -> the version the move commits
-- Output: {'ok'} | {'cold', day} | {'full'} | {'closed'} | {'missing'} (the booking holds no units
--         here) | {'busy'} (another move of the booking is under way)
local now = tonumber(ARGV[1])
expire_due(KEYS[5], KEYS[6], KEYS[3], KEYS[2], now, EXPIRE_BATCH)
local missing = days_missing(KEYS[7], split(ARGV[5]))
if missing then return {'cold', missing} end
local id = ARGV[2]
if redis.call('HEXISTS', KEYS[4], id) == 1 then return {'busy'} end
local cur = redis.call('HGET', KEYS[3], OWNER_BOOKING .. id)
if not cur then return {'missing'} end
local _, old = units_of(cur)
local held = {}
for _, f in ipairs(old) do held[f] = true end
local qty = tonumber(ARGV[3])
local extra = {}
for _, f in ipairs(split(ARGV[4])) do
  if not held[f] then extra[#extra + 1] = f end
end
local verdict = fits(KEYS[1], KEYS[2], qty, extra)
if verdict ~= 'ok' then return {verdict} end
take(KEYS[3], KEYS[2], OWNER_MOVE .. id, qty, extra, tonumber(ARGV[6]))
redis.call('HSET', KEYS[4], id, table.concat({ARGV[6], qty, ARGV[4], now}, UNITS_SEP))
return {'ok'}
