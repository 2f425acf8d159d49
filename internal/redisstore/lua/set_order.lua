-- setOrderCmd notes on a hold's record the payment provider's order made for it, so that the wheel
-- closes the order when the hold ends unpaid. A record that is gone is left gone.
-- KEYS[1] -> the hold's HASH
-- ARGV[1] -> the order's number
-- Output: 1 if noted, 0 if the record is gone
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], F_ORDER_NO, ARGV[1])
return 1
