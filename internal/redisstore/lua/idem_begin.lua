-- idemBeginCmd reserves an idempotency scope for a request, or answers the request that used it.
-- KEYS[1] -> the scope's HASH
-- ARGV[1] -> now ms, ARGV[2] -> the request's body hash, ARGV[3] -> lifetime ms,
-- ARGV[4] -> ms after which an unfinished reservation is given up (its process died)
-- Output: {'run'} | {'reused'} | {'running'} | {'done', status, body}
local now = tonumber(ARGV[1])
local rec = redis.call('HMGET', KEYS[1], 'hash', 'done', 'http_status', 'body', 'created_ms')
if rec[1] and not (rec[2] == '0' and now - tonumber(rec[5]) > tonumber(ARGV[4])) then
  if rec[1] ~= ARGV[2] then return {'reused'} end
  if rec[2] ~= '1' then return {'running'} end
  return {'done', rec[3], rec[4]}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'hash', ARGV[2], 'done', '0', 'created_ms', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return {'run'}
