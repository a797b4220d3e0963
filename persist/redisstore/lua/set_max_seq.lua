-- Raises the integer in KEYS[1] to ARGV[1] unless it already holds as much,
-- so that writers reporting positions out of order only move it forward.
-- Anything that is not an integer counts as 0.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local new = tonumber(ARGV[1])
if new > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return new
end
return cur
