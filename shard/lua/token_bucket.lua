-- A token bucket per bidder, refilled continuously by Redis TIME.
--
-- KEYS[1] the bidder's bucket   ratelimit:{bidder id}
-- ARGV[1] rate in tokens per second, ARGV[2] burst (bucket size)
--
-- Returns {1, 0} when a token was taken, else {0, ms until one is there}.
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local b = redis.call('HMGET', KEYS[1], 'tokens', 'at_us')
local tokens, at = tonumber(b[1]), tonumber(b[2])
if not tokens then
  tokens, at = burst, now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000000)

local allowed, wait_ms = 0, 0
if tokens >= 1 then
  tokens, allowed = tokens - 1, 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'at_us', string.format('%d', now))
-- A bucket that has refilled is the same as no bucket.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait_ms}
