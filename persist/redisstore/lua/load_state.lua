-- Writes a hot auction's state from PostgreSQL into Redis.
--
-- KEYS[1] state hash, KEYS[2] request ids, KEYS[3] aliases (as in
--         bid_batch.lua)
-- ARGV[1] '1' to overwrite (promotion, under the PostgreSQL row lock),
--         '0' to write only when absent (lazy load: Redis, once it has the
--         state, is ahead of PostgreSQL and must win)
-- ARGV[2..29] field/value pairs of the state
-- ARGV[30]    n, then n bidder/alias pairs (every bidder PostgreSQL holds)
-- ARGV[31+2n..] request id/record pairs of bids PostgreSQL already holds
--
-- Returns 1 if it wrote, 0 if the state was already there.
if ARGV[1] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('HSET', KEYS[1], unpack(ARGV, 2, 29))
local function hset_all(key, from, to)
  local i = from
  while i <= to do
    local last = math.min(i + 999, to)
    redis.call('HSET', key, unpack(ARGV, i, last))
    i = last + 1
  end
end
local records = 31 + 2 * tonumber(ARGV[30])
hset_all(KEYS[3], 31, records - 1)
hset_all(KEYS[2], records, #ARGV)
return 1
