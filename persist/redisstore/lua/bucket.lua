-- take_token takes a token from the bucket at key, refilled continuously
-- at rate per second up to burst by now (Redis TIME, in microseconds), and
-- returns 0, or the ms until a token is there. Go prepends this file to the
-- scripts that take tokens (token_bucket.lua, bid_batch.lua).
local function take_token(key, rate, burst, now)
  local b = redis.call('HMGET', key, 'tokens', 'at_us')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens then
    tokens, at = burst, now
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000000)
  local wait = 0
  if tokens >= 1 then
    tokens = tokens - 1
  else
    wait = math.ceil((1 - tokens) * 1000 / rate)
  end
  redis.call('HSET', key, 'tokens', string.format('%.6f', tokens), 'at_us', string.format('%d', now))
  -- A bucket left alone long enough to refill is the same as no bucket.
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
  return wait
end

