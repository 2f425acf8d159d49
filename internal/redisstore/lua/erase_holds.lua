-- eraseHoldsCmd gives an erased user's holds at one venue to their pseudonym: each record of
-- ARGV[3..] that names the user names the pseudonym instead, and those holds move from the user's
-- lists of holds and of live holds to the pseudonym's, scores kept, so that the limit of live holds
-- and the listing count them as before. Records keep their lifetimes; a list that receives holds
-- lives at least as long as the list they came from. A hold made after the caller read the user's
-- list is not among ARGV: it stays, and the count of holds left says so.
-- KEYS[1] -> the user's holds ZSET, KEYS[2] -> the user's live holds ZSET,
-- KEYS[3] -> the pseudonym's holds ZSET, KEYS[4] -> the pseudonym's live holds ZSET,
-- KEYS[5..] -> the holds' HASHes, in the order of ARGV[3..]
-- ARGV[1] -> user id, ARGV[2] -> pseudonym, ARGV[3..] -> hold ids
-- Output: {records among ARGV[3..] that name the pseudonym now, holds still in the user's holds ZSET}
local function move(src, dst, id)
  local score = redis.call('ZSCORE', src, id)
  if not score then return end
  local ttl = redis.call('PTTL', src)
  redis.call('ZADD', dst, score, id)
  redis.call('ZREM', src, id)
  if ttl > redis.call('PTTL', dst) then redis.call('PEXPIRE', dst, ttl) end
end
local n = 0
for i = 3, #ARGV do
  local h, id = KEYS[i + 2], ARGV[i]
  local user = redis.call('HGET', h, F_USER)
  if user == ARGV[1] then
    redis.call('HSET', h, F_USER, ARGV[2])
    user = ARGV[2]
  end
  if user == ARGV[2] then n = n + 1 end
  move(KEYS[1], KEYS[3], id)
  move(KEYS[2], KEYS[4], id)
end
return {n, redis.call('ZCARD', KEYS[1])}
