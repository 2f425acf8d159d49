-- holdSlotsCmd takes qty units of every slot of a physical window for a new hold, all or nothing,
-- and puts the hold's deadline on the wheel. With an idempotency record (KEYS[10]) it is also the
-- request's idempotency step, in the same round trip: a repeat of a request already answered gets
-- that answer and takes nothing; a final answer (a new hold, a full slot) is stored with the hold;
-- the other refusals reserve the record for the caller to finish (idem_finish.lua).
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> ended ZSET, KEYS[6] -> days SET, KEYS[7] -> the new hold's HASH,
-- KEYS[8] -> the user's holds ZSET, KEYS[9] -> the user's live holds ZSET,
-- KEYS[10] -> the venue's catalog version STRING,
-- KEYS[11] -> the request's idempotency record HASH (absent without one; see idem_begin.lua)
-- ARGV[1] -> now ms, ARGV[2] -> deadline ms, ARGV[3] -> qty, ARGV[4] -> hold id, ARGV[5] -> keep ms,
-- ARGV[6] -> resource-days, comma-joined, ARGV[7] -> slot fields, comma-joined,
-- ARGV[8] -> most live holds the user may have at the venue (0: no limit),
-- ARGV[9] -> the request's body hash, ARGV[10] -> the record's lifetime ms, ARGV[11] -> ms after
-- which an unfinished reservation is given up, ARGV[12]/ARGV[13] -> status and body of the answer
-- to a new hold, ARGV[14]/ARGV[15] -> of the answer to a full slot (ARGV[9..15] unused without a
-- record), ARGV[16] -> the catalog version the hold was decided on, ARGV[17..] -> field/value
-- pairs of the hold record
-- Output: {'ok'} | {'cold', day} | {'closed'} | {'full'} | {'limit'} | {'stale'} |
--         {'done', status, body} | {'reused'} | {'running'}
local now = tonumber(ARGV[1])
local deadline = tonumber(ARGV[2])
local qty = tonumber(ARGV[3])
local id = ARGV[4]
local keep = tonumber(ARGV[5])
local idem = KEYS[11]
if idem then
  local rec = redis.call('HMGET', idem, 'hash', 'done', 'http_status', 'body', 'created_ms')
  if rec[1] and not (rec[2] == '0' and now - tonumber(rec[5]) > tonumber(ARGV[11])) then
    if rec[1] ~= ARGV[9] then return {'reused'} end
    if rec[2] ~= '1' then return {'running'} end
    return {'done', rec[3], rec[4]}
  end
end
-- The catalog changed since the instance read what it decided with: it reads again and retries.
if redis.call('GET', KEYS[10]) ~= ARGV[16] then return {'stale'} end
-- answer stores the request's answer (status, body) as done, or reserves the record (no status).
local function answer(status, body)
  if not idem then return end
  redis.call('DEL', idem)
  if status then
    redis.call('HSET', idem, 'hash', ARGV[9], 'done', '1', 'created_ms', now, 'http_status', status, 'body', body)
  else
    redis.call('HSET', idem, 'hash', ARGV[9], 'done', '0', 'created_ms', now)
  end
  redis.call('PEXPIRE', idem, tonumber(ARGV[10]))
end
expire_due(KEYS[4], KEYS[5], KEYS[3], KEYS[2], now, EXPIRE_BATCH)
local missing = days_missing(KEYS[6], split(ARGV[6]))
if missing then return {'cold', missing} end
local most = tonumber(ARGV[8])
if most > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now)
  if redis.call('ZCARD', KEYS[9]) >= most then
    answer()
    return {'limit'}
  end
end
local fields = split(ARGV[7])
local verdict = fits(KEYS[1], KEYS[2], qty, fields)
if verdict == 'full' then
  answer(ARGV[14], ARGV[15])
  return {'full'}
end
if verdict ~= 'ok' then
  answer()
  return {verdict}
end
take(KEYS[3], KEYS[2], OWNER_HOLD .. id, qty, fields, 0)
local rec = {}
for i = 17, #ARGV do rec[#rec + 1] = ARGV[i] end
new_hold(id, now, deadline, keep, ARGV[7], rec)
answer(ARGV[12], ARGV[13])
return {'ok'}
