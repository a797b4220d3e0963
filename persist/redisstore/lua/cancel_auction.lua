-- A seller cancels a hot auction, decided with Redis TIME and state, the
-- ones that decide its bids: only while it is open and before its end, and
-- only before its first bid (seq 0). bid_batch.lua refuses every bid once
-- the status is not OPEN, so a cancel and a bid never both succeed.
--
-- KEYS[1] state hash  auction:{id}:state
--
-- Returns {1, end_us} cancelled (now or before), {2} closed or ended,
-- {3} has bids, {0} no state in Redis.
local s = redis.call('HMGET', KEYS[1], 'status', 'end_us', 'seq')
if not s[1] then
  return {0}
end
if s[1] == 'CANCELLED' then
  return {1, s[2]}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if s[1] ~= 'OPEN' or now >= tonumber(s[2]) then
  return {2}
end
if tonumber(s[3]) > 0 then
  return {3}
end
redis.call('HSET', KEYS[1], 'status', 'CANCELLED')
return {1, s[2]}
