-- refuseHoldCmd ends a hold that cannot become a booking because the units it holds are sold: the
-- capacity ledger in MySQL refused its confirm (mode 'confirming': the caller's own CONFIRMING hold),
-- or a repair after Redis lost writes found its slot holding more units than it has (mode 'overfull':
-- a live HELD hold, refused only while one of its slots is still over capacity). Its units come back
-- and its record says CANCELLED, readable for keep ms.
-- KEYS[1] -> cap HASH, KEYS[2] -> used HASH, KEYS[3] -> owners HASH, KEYS[4] -> wheel ZSET,
-- KEYS[5] -> ended ZSET, KEYS[6] -> confirming ZSET, KEYS[7] -> the hold's HASH,
-- KEYS[8] -> the user's live holds ZSET
-- ARGV[1] -> now ms, ARGV[2] -> keep ms, ARGV[3] -> 'confirming' | 'overfull'
-- Output: 'refused' | 'missing' | 'fits' (overfull: no slot of the hold is over capacity) |
--         the hold's status when it is not one the mode refuses
local now = tonumber(ARGV[1])
local h = KEYS[7]
local status = redis.call('HGET', h, F_STATUS)
if not status then return 'missing' end
if ARGV[3] == 'confirming' then
  if status ~= HOLD_CONFIRMING then return status end
else
  if status ~= HOLD_HELD or tonumber(redis.call('HGET', h, F_DEADLINE)) <= now then return status end
  local over = false
  for _, f in ipairs(split(redis.call('HGET', h, F_SLOTS))) do
    if tonumber(redis.call('HGET', KEYS[2], f) or '0') > tonumber(redis.call('HGET', KEYS[1], f) or '0') then over = true end
  end
  if not over then return 'fits' end
end
local id = redis.call('HGET', h, F_ID)
give_back(KEYS[3], KEYS[2], OWNER_HOLD .. id)
for i = 4, 6 do redis.call('ZREM', KEYS[i], id) end
redis.call('ZREM', KEYS[8], id)
redis.call('HSET', h, F_STATUS, HOLD_CANCELLED, F_ENDED, now, F_REFUSED, '1')
redis.call('HDEL', h, F_SINCE)
redis.call('PEXPIRE', h, tonumber(ARGV[2]))
return 'refused'
