-- Shared by every script; scripts.go prepends the prelude (hold statuses, record fields, owner
-- kinds and separators, all defined in Go) and then this file. Every key a script touches arrives
-- in KEYS, and all of them carry one venue's hash tag.

local function split(s)
  local out = {}
  if not s then return out end
  for f in string.gmatch(s, '[^' .. LIST_SEP .. ']+') do out[#out + 1] = f end
  return out
end

-- An owner's units are written qty|fields|version: the version of the booking change that took
-- them (0 for a hold). units_of decodes them.
local function units_of(v)
  local a = string.find(v, UNITS_SEP, 1, true)
  local b = string.find(v, UNITS_SEP, a + 1, true)
  local ver = 0
  if b then ver = tonumber(string.sub(v, b + 1)) else b = #v + 1 end
  return tonumber(string.sub(v, 1, a - 1)), split(string.sub(v, a + 1, b - 1)), ver
end

local function units(qty, fields, ver)
  return qty .. UNITS_SEP .. table.concat(fields, LIST_SEP) .. UNITS_SEP .. ver
end

-- give_back returns the units of one owner exactly once: 1 if the owner held units, 0 if it was
-- already gone. With upto, units taken by a later change than upto stay: a release that commits
-- version 2 must not give back what a check-in that committed version 3 took again.
local function give_back(owners, used, owner, upto)
  local v = redis.call('HGET', owners, owner)
  if not v then return 0 end
  local qty, fields, ver = units_of(v)
  if upto and ver > upto then return 0 end
  for _, f in ipairs(fields) do
    if redis.call('HINCRBY', used, f, -qty) <= 0 then redis.call('HDEL', used, f) end
  end
  redis.call('HDEL', owners, owner)
  return 1
end

-- take adds qty units of each field for owner, taken by change ver (no capacity check: callers
-- check first).
local function take(owners, used, owner, qty, fields, ver)
  for _, f in ipairs(fields) do redis.call('HINCRBY', used, f, qty) end
  redis.call('HSET', owners, owner, units(qty, fields, ver))
end

-- move_units gives the units that from owns to owner, at version ver (a hold's units become its
-- booking's when it confirms); false when from owns none.
local function move_units(owners, from, owner, ver)
  local v = redis.call('HGET', owners, from)
  if not v then return false end
  local qty, fields = units_of(v)
  redis.call('HSET', owners, owner, units(qty, fields, ver))
  redis.call('HDEL', owners, from)
  return true
end

-- retag moves an owner's units to version ver, if that is later than theirs.
local function retag(owners, owner, ver)
  local v = redis.call('HGET', owners, owner)
  if not v then return end
  local qty, fields, was = units_of(v)
  if ver > was then redis.call('HSET', owners, owner, units(qty, fields, ver)) end
end

-- fits reports whether qty more units fit in every field: 'ok', 'closed' or 'full'.
local function fits(cap, used, qty, fields)
  for _, f in ipairs(fields) do
    local c = redis.call('HGET', cap, f)
    if not c then return 'closed' end
    local u = tonumber(redis.call('HGET', used, f) or '0')
    if u + qty > tonumber(c) then return 'full' end
  end
  return 'ok'
end

-- expire_due gives back the units of holds whose deadline is at or before now and moves them from
-- the wheel to the ended set, where the wheel writes their records and announces them. A hold counts
-- as occupying only while its deadline is in the future, so every script that reads or takes units
-- runs this first: availability stays exact even when the ticker runs late.
local function expire_due(wheel, ended, owners, used, now, limit)
  local due = redis.call('ZRANGEBYSCORE', wheel, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #due, 2 do
    give_back(owners, used, OWNER_HOLD .. due[i])
    redis.call('ZADD', ended, due[i + 1], due[i])
    redis.call('ZREM', wheel, due[i])
  end
  return #due / 2
end

-- days_missing returns the first resource-day of list that is not loaded, or false.
local function days_missing(days, list)
  for _, d in ipairs(list) do
    if redis.call('SISMEMBER', days, d) == 0 then return d end
  end
  return false
end

-- new_hold records a new hold that has taken its units: its HASH (held, the slot fields slots,
-- then the field/value pairs of rec) kept until keep ms past its deadline, the deadline on
-- the wheel, and the hold in the user's holds (the last keep ms of them) and live holds. The keys
-- are holdSlotsCmd's: KEYS[4] the wheel, KEYS[7] the hold, KEYS[8] and KEYS[9] the user's holds and
-- live holds.
local function new_hold(id, now, deadline, keep, slots, rec)
  redis.call('HSET', KEYS[7], F_STATUS, HOLD_HELD, F_SLOTS, slots, unpack(rec))
  redis.call('PEXPIRE', KEYS[7], deadline - now + keep)
  redis.call('ZADD', KEYS[4], deadline, id)
  redis.call('ZADD', KEYS[8], now, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now - keep)
  redis.call('PEXPIRE', KEYS[8], deadline - now + keep)
  redis.call('ZADD', KEYS[9], deadline, id)
  redis.call('PEXPIRE', KEYS[9], deadline - now + 1000)
end
