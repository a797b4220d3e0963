-- Decides a batch of bids on one hot auction, atomically and in order.
--
-- KEYS[1] state hash   auction:{id}:state  price, inc (cents), leader, end_us,
--                                          status, window_us, by_us, seq, seller,
--                                          max_end_us (extension cap, 0: none)
-- KEYS[2] request ids  auction:{id}:reqs   request id -> "seq|at_us|end_us|bidder|amount"
-- KEYS[3] bid log      auction:{id}:log    stream of accepted bids
-- ARGV[1] the auction's state-update channel, ARGV[2] its id, then triples
--         of request id, bidder id, amount in cents.
--
-- The state is read once, decided on in locals and written once, so a batch
-- of n bids costs one read and one write plus one XADD per accepted bid.
-- Time is Redis TIME, read once: the whole batch is decided at one instant.
-- A batch that accepted bids publishes the new state (format in
-- updates.go), so no second round trip is needed for viewers.
--
-- Returns {summary, result1, result2, ...}, summary = {price, inc, end_us,
-- status, seq, leader, seller}, each result one of
--   {1, seq, at_us, end_us}      accepted
--   {2, seq, at_us, end_us}      replay of an accepted bid (same bidder and amount)
--   {3}                          request id reused for another bid
--   {4, price, inc}              too low
--   {5}                          closed
--   {6}                          the seller's own bid
-- or {0} when the state is missing (the caller loads it and retries).

local function int(n) return string.format('%d', n) end

local s = redis.call('HMGET', KEYS[1], 'price', 'inc', 'leader', 'end_us', 'status', 'window_us', 'by_us', 'seq', 'seller', 'max_end_us')
if not s[1] then
  return {0}
end
local price, inc, leader = tonumber(s[1]), tonumber(s[2]), s[3]
local end_us, status = tonumber(s[4]), s[5]
local window_us, by_us, seq = tonumber(s[6]), tonumber(s[7]), tonumber(s[8])
local seller = s[9]
local max_end = tonumber(s[10] or '0') or 0

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local n = (#ARGV - 2) / 3
local ids = {}
for i = 1, n do ids[i] = ARGV[3 * i] end
local known = redis.call('HMGET', KEYS[2], unpack(ids))

local fresh = {}   -- request ids accepted in this batch
local newreqs = {} -- HSET arguments for them
local out = {}
local changed = false

for i = 1, n do
  local id, bidder, amount = ids[i], ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2])
  local prior = known[i] or fresh[id]
  if prior then
    local pseq, pat, pend, pbidder, pamount = string.match(prior, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
    if pbidder == bidder and tonumber(pamount) == amount then
      out[i + 1] = {2, tonumber(pseq), tonumber(pat), tonumber(pend)}
    else
      out[i + 1] = {3}
    end
  elseif bidder == seller then
    out[i + 1] = {6}
  elseif status ~= 'OPEN' or now >= end_us then
    out[i + 1] = {5}
  elseif amount < price + inc then
    out[i + 1] = {4, price, inc}
  else
    price, leader, seq, changed = amount, bidder, seq + 1, true
    if end_us - now < window_us and now + by_us > end_us then
      -- Never past the cap; the cap is after the end, so never shorter.
      if max_end > 0 and now + by_us > max_end then
        end_us = math.max(end_us, max_end)
      else
        end_us = now + by_us
      end
    end
    redis.call('XADD', KEYS[3], '*', 'seq', int(seq), 'bidder', bidder, 'amount', int(amount),
      'req', id, 'at_us', int(now), 'end_us', int(end_us))
    local rec = int(seq) .. '|' .. int(now) .. '|' .. int(end_us) .. '|' .. bidder .. '|' .. int(amount)
    fresh[id] = rec
    newreqs[#newreqs + 1] = id
    newreqs[#newreqs + 1] = rec
    out[i + 1] = {1, seq, now, end_us}
  end
end

if changed then
  redis.call('HSET', KEYS[1], 'price', int(price), 'leader', leader, 'end_us', int(end_us), 'seq', int(seq))
  redis.call('HSET', KEYS[2], unpack(newreqs))
  redis.call('PUBLISH', ARGV[1], 'u1|' .. ARGV[2] .. '|' .. int(price) .. '|' .. leader .. '|' .. int(end_us) ..
    '|' .. status .. '|' .. int(seq) .. '|' .. int(now))
end
out[1] = {price, inc, end_us, status, seq, leader or '', seller or ''}
return out
