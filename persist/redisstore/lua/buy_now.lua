-- Buy-now on a hot auction, atomically with its bids (bid_batch.lua): while
-- it is open, before its end by Redis TIME, with a buy-now price and no
-- accepted bid, it closes at that price with the buyer as winner and its end
-- at now, and the buy-now row goes to the log like any accepted bid.
--
-- KEYS[1..4] state, request ids, log, aliases (as in bid_batch.lua); the
--            state's buy_now field is the price in cents (0: none); the
--            buyer, the first bidder, is alias 1
-- ARGV[1] the auction's state-update channel, ARGV[2] its id,
-- ARGV[3] request id, ARGV[4] buyer id
--
-- Returns bid_batch.lua's result codes: {1, seq, at_us, end_us, amount, 1,
-- price} bought, {2, ...} replay, {3} key reused, {5} closed, {6} the
-- seller, {9} no buy-now price or a bid already; {0}: no state.
local function int(n) return string.format('%d', n) end

local s = redis.call('HMGET', KEYS[1], 'status', 'end_us', 'seq', 'seller', 'buy_now')
if not s[1] then
  return {0}
end
local id, buyer = ARGV[3], ARGV[4]
local prior = redis.call('HGET', KEYS[2], id)
if prior then
  local pseq, pat, pend, pbidder, pamount, pkind = string.match(prior, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|([%a_]+)|')
  if pbidder == buyer and pkind == 'buy_now' then
    return {2, tonumber(pseq), tonumber(pat), tonumber(pend), tonumber(pamount), 1, tonumber(pamount)}
  end
  return {3}
end
if buyer == s[4] then
  return {6}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if s[1] ~= 'OPEN' or now >= tonumber(s[2]) then
  return {5}
end
local price = tonumber(s[5] or '0') or 0
if price == 0 or tonumber(s[3]) > 0 then
  return {9}
end
redis.call('XADD', KEYS[3], '*', 'seq', '1', 'bidder', buyer, 'amount', int(price), 'req', id,
  'at_us', int(now), 'end_us', int(now), 'kind', 'buy_now')
redis.call('HSET', KEYS[1], 'price', int(price), 'leader', buyer, 'lmax', int(price), 'end_us', int(now),
  'seq', '1', 'status', 'CLOSED', 'lalias', '1')
redis.call('HSET', KEYS[4], buyer, '1')
redis.call('HSET', KEYS[2], id, '1|' .. int(now) .. '|' .. int(now) .. '|' .. buyer .. '|' .. int(price) ..
  '|buy_now|0|1|' .. int(price))
redis.call('SPUBLISH', ARGV[1], 'u1|' .. ARGV[2] .. '|' .. int(price) .. '|' .. buyer .. '|' .. int(now) ..
  '|CLOSED|1|' .. int(now) .. '||1')
return {1, 1, now, now, price, 1, price}
