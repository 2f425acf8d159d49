-- holdRolesCmd takes a hold for a service that needs several resources at once (a counsellor and a
-- room): for every role, the first candidate resource whose slots all have qty units free; then the
-- units of every chosen resource, all or none, and the hold's deadline on the wheel.
-- KEYS[1..10] -> as holdSlotsCmd: cap, used, owners, wheel, ended, days, the new hold's HASH, the
-- user's holds ZSET, the user's live holds ZSET, the venue's catalog version STRING
-- ARGV[1] -> now ms, ARGV[2] -> deadline ms, ARGV[3] -> qty, ARGV[4] -> hold id, ARGV[5] -> keep ms,
-- ARGV[6] -> most live holds the user may have at the venue (0: no limit), ARGV[7] -> number of
-- roles r, then for each role: its name and its number of candidates c, then c triples: resource id,
-- resource-days comma-joined, slot fields comma-joined; then the catalog version the hold was
-- decided on; then field/value pairs of the hold record
-- Output: {'ok', resource id chosen for each role...} | {'cold', day} | {'full'} | {'closed'} |
--         {'limit'} | {'stale'}
local now = tonumber(ARGV[1])
local deadline = tonumber(ARGV[2])
local qty = tonumber(ARGV[3])
local id = ARGV[4]
local keep = tonumber(ARGV[5])
expire_due(KEYS[4], KEYS[5], KEYS[3], KEYS[2], now, EXPIRE_BATCH)
local roles = {}
local i = 8
for r = 1, tonumber(ARGV[7]) do
  local role = {name = ARGV[i], cands = {}}
  local c = tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, c do
    role.cands[#role.cands + 1] = {rid = ARGV[i], days = split(ARGV[i + 1]), fields = split(ARGV[i + 2])}
    i = i + 3
  end
  roles[r] = role
end
if redis.call('GET', KEYS[10]) ~= ARGV[i] then return {'stale'} end
local rec = {}
for j = i + 1, #ARGV do rec[#rec + 1] = ARGV[j] end
for _, role in ipairs(roles) do
  for _, cand in ipairs(role.cands) do
    local missing = days_missing(KEYS[6], cand.days)
    if missing then return {'cold', missing} end
  end
end
local most = tonumber(ARGV[6])
if most > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now)
  if redis.call('ZCARD', KEYS[9]) >= most then return {'limit'} end
end
local chosen, all, days, picks = {}, {}, {}, {}
local verdict = 'closed'
for r, role in ipairs(roles) do
  local pick = nil
  for _, cand in ipairs(role.cands) do
    local v = fits(KEYS[1], KEYS[2], qty, cand.fields)
    if v == 'ok' then
      pick = cand
      break
    end
    if v == 'full' then verdict = 'full' end
  end
  if not pick then return {verdict} end
  chosen[r] = pick.rid
  picks[#picks + 1] = role.name .. '=' .. pick.rid
  for _, f in ipairs(pick.fields) do all[#all + 1] = f end
  for _, d in ipairs(pick.days) do days[#days + 1] = d end
end
take(KEYS[3], KEYS[2], OWNER_HOLD .. id, qty, all, 0)
-- What was chosen follows the record's own fields, so that it wins over a field of the same name.
for _, fv in ipairs({F_RESOURCE, chosen[1], F_ROLES, table.concat(picks, LIST_SEP),
    F_DAYS, table.concat(days, LIST_SEP)}) do
  rec[#rec + 1] = fv
end
new_hold(id, now, deadline, keep, table.concat(all, LIST_SEP), rec)
local out = {'ok'}
for _, rid in ipairs(chosen) do out[#out + 1] = rid end
return out
