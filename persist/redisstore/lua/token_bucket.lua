-- Token buckets of several bidders (take_token: bucket.lua).
--
-- KEYS     one bucket per bidder, ratelimit:{lane}:<bidder id>; the keys of one
--          call share a lane, so they live in one Redis Cluster slot
-- ARGV[1]  rate in tokens per second, ARGV[2] burst (bucket size)
--
-- Returns, per key, 0 when a token was taken, else the ms until one is there.
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local out = {}
for i, key in ipairs(KEYS) do
  out[i] = take_token(key, rate, burst, now)
end
return out
