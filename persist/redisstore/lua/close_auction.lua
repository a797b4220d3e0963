-- Closes one hot auction in Redis, deciding with Redis TIME, the clock that
-- decided its bids (bid_batch.lua refuses every bid once now >= end_us or
-- status is not OPEN, so a CLOSED state never changes again).
--
-- KEYS[1] state hash  auction:{id}:state  price, inc (cents), leader, end_us,
--                                          status, window_us, by_us, seq
--
-- Returns
--   {1, price, leader, seq, end_us}  closed, now or by an earlier call: the
--                                    final state (leader '' when nobody bid)
--   {2, end_us}                      not ended yet: the (extended) end
--   {3}                              cancelled by its seller
--   {0}                              no state in Redis
--
-- Idempotent: once CLOSED it only reads, so a closer that crashed after this
-- call and before settling PostgreSQL gets the same final state again.
-- Values are returned as Redis stored them (decimal strings), so no amount
-- goes through a Lua double.
local s = redis.call('HMGET', KEYS[1], 'price', 'leader', 'end_us', 'status', 'seq')
if not s[1] then
  return {0}
end
if s[4] == 'CANCELLED' then
  return {3}
end
if s[4] ~= 'CLOSED' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if now < tonumber(s[3]) then
    return {2, s[3]}
  end
  redis.call('HSET', KEYS[1], 'status', 'CLOSED')
end
return {1, s[1], s[2] or '', s[5], s[3]}
