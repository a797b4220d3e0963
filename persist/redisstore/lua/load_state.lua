-- Writes a hot auction's state from PostgreSQL into Redis.
--
-- KEYS[1] state hash, KEYS[2] request ids (as in bid_batch.lua)
-- ARGV[1] '1' to overwrite (promotion, under the PostgreSQL row lock),
--         '0' to write only when absent (lazy load: Redis, once it has the
--         state, is ahead of PostgreSQL and must win)
-- ARGV[2..27] field/value pairs of the state
-- ARGV[28..] request id/record pairs of bids PostgreSQL already holds
--
-- Returns 1 if it wrote, 0 if the state was already there.
if ARGV[1] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2, 27))
local i = 28
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  redis.call('HSET', KEYS[2], unpack(ARGV, i, last))
  i = last + 1
end
return 1
