-- Shared by every script (prepended by scripts.go). Keys built inside a script (a hold's HASH from
-- its id) carry the same {venue} hash tag as KEYS[], so they live in the same Cluster slot.

-- give_back returns the units of one owner ("h:<hold>" / "b:<booking>") exactly once.
-- Output: 1 if the owner held units, 0 if it was already gone.
local function give_back(owners, used, owner)
  local v = redis.call('HGET', owners, owner)
  if not v then return 0 end
  local bar = string.find(v, '|', 1, true)
  local qty = tonumber(string.sub(v, 1, bar - 1))
  for f in string.gmatch(string.sub(v, bar + 1), '[^,]+') do
    if redis.call('HINCRBY', used, f, -qty) <= 0 then redis.call('HDEL', used, f) end
  end
  redis.call('HDEL', owners, owner)
  return 1
end

-- take adds qty units to each field for owner (no capacity check: callers check first).
local function take(owners, used, owner, qty, fields)
  for _, f in ipairs(fields) do redis.call('HINCRBY', used, f, qty) end
  redis.call('HSET', owners, owner, qty .. '|' .. table.concat(fields, ','))
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

-- expire_due ends holds whose deadline is at or before now, giving their units back. A hold counts
-- as occupying only while its deadline is in the future, so every script that reads or takes units
-- runs this first: availability stays exact even when the ticker runs late.
local function expire_due(wheel, owners, used, holdprefix, now, limit, keep_ms)
  local due = redis.call('ZRANGEBYSCORE', wheel, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    give_back(owners, used, 'h:' .. id)
    local hk = holdprefix .. id
    if redis.call('HGET', hk, 'status') == 'HELD' then
      redis.call('HSET', hk, 'status', 'EXPIRED', 'ended_ms', now)
      redis.call('PEXPIRE', hk, keep_ms)
    end
    redis.call('ZREM', wheel, id)
  end
  return #due
end

-- days_loaded returns the first resource-day of list that is not loaded, or false.
local function days_missing(days, list)
  for _, d in ipairs(list) do
    if redis.call('SISMEMBER', days, d) == 0 then return d end
  end
  return false
end

local function split(s)
  local out = {}
  for f in string.gmatch(s, '[^,]+') do out[#out + 1] = f end
  return out
end
