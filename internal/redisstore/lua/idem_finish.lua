-- idemFinishCmd stores the answer of a reserved request, or (ARGV[1] = '') gives up the reservation
-- so that a retry runs again.
-- KEYS[1] -> the scope's HASH
-- ARGV[1] -> status ('' to give up), ARGV[2] -> body
-- Output: 1 if the record changed, 0 if there was no unfinished reservation
if redis.call('HGET', KEYS[1], 'done') ~= '0' then return 0 end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'done', '1', 'http_status', ARGV[1], 'body', ARGV[2])
return 1
