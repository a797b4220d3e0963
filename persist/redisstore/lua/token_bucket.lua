-- Token buckets of several bidders, refilled continuously by Redis TIME.
--
-- KEYS     one bucket per bidder, ratelimit:{lane}:<bidder id>; the keys of one
--          call share a lane, so they live in one Redis Cluster slot
-- ARGV[1]  rate in tokens per second, ARGV[2] burst (bucket size)
--
-- Returns, per key, 0 when a token was taken, else the ms until one is there.
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- A bucket left alone long enough to refill is the same as no bucket.
local ttl = math.ceil(burst * 1000 / rate) + 1000

local out = {}
for i, key in ipairs(KEYS) do
  local b = redis.call('HMGET', key, 'tokens', 'at_us')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens then
    tokens, at = burst, now
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000000)
  if tokens >= 1 then
    tokens, out[i] = tokens - 1, 0
  else
    out[i] = math.ceil((1 - tokens) * 1000 / rate)
  end
  redis.call('HSET', key, 'tokens', string.format('%.6f', tokens), 'at_us', string.format('%d', now))
  redis.call('PEXPIRE', key, ttl)
end
return out
