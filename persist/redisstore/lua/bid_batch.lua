-- Decides a batch of bids on one hot auction, atomically and in order.
--
-- KEYS[1] state hash   auction:{id}:state  price, inc (cents), leader, end_us,
--                                          status, window_us, by_us, seq, seller,
--                                          max_end_us (extension cap, 0: none),
--                                          lmax (leader's hidden maximum),
--                                          reserve (0: none),
--                                          lalias (the leader's alias)
-- KEYS[2] request ids  auction:{id}:reqs   request id -> record (below)
-- KEYS[3] bid log      auction:{id}:log    stream of accepted rows
-- KEYS[4] aliases      auction:{id}:aliases bidder -> alias: a bidder's
--                                          first accepted row numbers them
--                                          after those before (one HGET per
--                                          accepted bid, HLEN + HSET for a
--                                          new bidder)
-- KEYS[5...] bidders' token buckets (ratelimit:{lane}:<bidder>), when the
--         batch takes its tokens here: only on a single Redis server, where
--         they may be in other slots (take_token: bucket.lua)
-- ARGV[1] the auction's state-update channel, ARGV[2] its id, ARGV[3] and
--         ARGV[4] the buckets' rate (tokens per second) and burst, then per
--         bid request id, bidder id, value in cents, kind ('straight' or
--         'proxy'; a proxy bid's value is its maximum), and its bucket: k
--         for KEYS[4 + k], 0 to take no token (one taken already, or a bid
--         the caller knows is refused).
--
-- The rules are cold_bid.sql's (README "Auction rules"): the leader's
-- proxy raises their maximum; a higher value leads; a value up to the
-- leader's maximum is answered by an automatic row of the leader's, whose
-- request id is derived from the challenger's (auto_id, the same as
-- bidgate.AutomaticRequestID). Then the price jumps to the reserve once the
-- leader's maximum reaches it.
--
-- The state is read once, decided on in locals and written once, so a batch
-- of n bids costs one read and one write plus one XADD per accepted row.
-- Time is Redis TIME, read once: the whole batch is decided at one instant.
-- A batch that accepted bids publishes the new state (format in
-- updates.go), so no second round trip is needed for viewers.
--
-- A record is "seq|at_us|end_us|bidder|amount|kind|max|leading|price":
-- the bid's row and the state right after it, so that a replay is
-- answered like the original; a straight bid that led is kept short, as
-- "seq|at_us|end_us|bidder|amount".
--
-- Returns {summary, result1, result2, ...}, summary = {price, inc, end_us,
-- status, seq, leader, seller}, each result one of
--   {1, seq, at_us, end_us, amount, leading, price}  accepted
--   {2, seq, at_us, end_us, amount, leading, price}  replay of an accepted bid
--   {3}                          request id reused for another bid
--   {4, price, inc}              too low
--   {5}                          closed
--   {6}                          the seller's own bid
--   {7}                          the leader's straight bid
--   {8}                          the leader's proxy bid not above their maximum
--   {10, wait_ms}                the bidder is over their rate (nothing else done)
-- or {0} when the state is missing (the caller loads it and retries).

local function int(n) return string.format('%d', n) end

local function auto_id(req)
  local h = redis.sha1hex('bidgate-automatic:' .. req)
  local variant = (tonumber(string.sub(h, 17, 17), 16) % 2 == 1) and 'f' or 'e'
  return string.sub(h, 1, 8) .. '-' .. string.sub(h, 9, 12) .. '-5' .. string.sub(h, 14, 16) .. '-' ..
    variant .. string.sub(h, 18, 20) .. '-' .. string.sub(h, 21, 32)
end

local s = redis.call('HMGET', KEYS[1], 'price', 'inc', 'leader', 'end_us', 'status', 'window_us', 'by_us', 'seq',
  'seller', 'max_end_us', 'lmax', 'reserve', 'lalias')
if not s[1] then
  return {0}
end
local price, inc, leader = tonumber(s[1]), tonumber(s[2]), s[3]
if leader == '' then leader = false end
local end_us, status = tonumber(s[4]), s[5]
local window_us, by_us, seq = tonumber(s[6]), tonumber(s[7]), tonumber(s[8])
local seller = s[9]
local max_end = tonumber(s[10] or '0') or 0
local lmax = tonumber(s[11] or '') or (leader and price or 0)
local reserve = tonumber(s[12] or '0') or 0
local lalias = s[13] or ''

local aliases = {} -- bidder -> alias, as read or given in this batch
local function alias_of(bidder)
  local a = aliases[bidder] or redis.call('HGET', KEYS[4], bidder)
  if not a then
    a = int(redis.call('HLEN', KEYS[4]) + 1)
    redis.call('HSET', KEYS[4], bidder, a)
  end
  aliases[bidder] = a
  return a
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local rate, burst = tonumber(ARGV[3]), tonumber(ARGV[4])
local n = (#ARGV - 4) / 5
local ids = {}
for i = 1, n do ids[i] = ARGV[5 * i] end
local known = redis.call('HMGET', KEYS[2], unpack(ids))

local fresh = {}   -- request ids accepted in this batch
local newreqs = {} -- HSET arguments for them
local out = {}
local changed = false

local function add_row(id, bidder, amount, kind, max, outbid, outbid_max)
  seq = seq + 1
  local f = {'seq', int(seq), 'bidder', bidder, 'amount', int(amount), 'req', id,
    'at_us', int(now), 'end_us', int(end_us)}
  if kind ~= 'straight' then -- the default, left out: most bids are straight
    f[#f + 1], f[#f + 2] = 'kind', kind
  end
  if kind == 'proxy' then
    f[#f + 1], f[#f + 2] = 'max', int(max)
  end
  if outbid then -- the leader this row took the lead from, told by a notice
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'outbid', outbid, 'outbid_max', int(outbid_max)
  end
  redis.call('XADD', KEYS[3], '*', unpack(f))
  return seq
end

for i = 1, n do
  local id, bidder, value, kind = ids[i], ARGV[5 * i + 1], tonumber(ARGV[5 * i + 2]), ARGV[5 * i + 3]
  local bucket = tonumber(ARGV[5 * i + 4])
  local wait = 0
  if bucket > 0 then
    wait = take_token(KEYS[4 + bucket], rate, burst, now)
  end
  local prior = known[i] or fresh[id]
  if wait > 0 then
    out[i + 1] = {10, wait}
  elseif prior then
    local pseq, pat, pend, pbidder, pamount, pkind, pmax, plead, pprice =
      string.match(prior, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|([%a_]+)|(%d+)|(%d)|(%d+)$')
    if not pseq then -- the short form: a straight bid that led
      pseq, pat, pend, pbidder, pamount = string.match(prior, '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
      pkind, pmax, plead, pprice = 'straight', '0', '1', pamount
    end
    local pvalue = (pkind == 'proxy') and pmax or pamount
    if not pseq then
      out[i + 1] = {3}
    elseif pbidder == bidder and pkind == kind and tonumber(pvalue) == value then
      out[i + 1] = {2, tonumber(pseq), tonumber(pat), tonumber(pend), tonumber(pamount), tonumber(plead), tonumber(pprice)}
    else
      out[i + 1] = {3}
    end
  elseif bidder == seller then
    out[i + 1] = {6}
  elseif status ~= 'OPEN' or now >= end_us then
    out[i + 1] = {5}
  elseif value < price + inc then
    out[i + 1] = {4, price, inc}
  elseif bidder == leader and kind ~= 'proxy' then
    out[i + 1] = {7}
  elseif bidder == leader and value <= lmax then
    out[i + 1] = {8}
  else
    changed = true
    if end_us - now < window_us and now + by_us > end_us then
      -- Never past the cap; the cap is after the end, so never shorter.
      if max_end > 0 and now + by_us > max_end then
        end_us = math.max(end_us, max_end)
      else
        end_us = now + by_us
      end
    end
    local amount, leading -- the bid's row and whether it leads
    local outbid, outbid_max -- the leader it replaced, if any
    local alias = alias_of(bidder)
    if bidder == leader then -- raise: the price stays
      lmax, leading = value, 1
    elseif not leader or value > lmax then -- lead
      outbid, outbid_max = leader, lmax
      if kind ~= 'proxy' then
        price = value
      elseif not leader then
        price = price + inc
      else
        price = math.min(value, lmax + inc)
      end
      leader, lmax, leading, lalias = bidder, value, 1, alias
    else -- answered by the leader's proxy
      price, amount, leading = math.min(lmax, value + inc), value, 0
    end
    if reserve > 0 and lmax >= reserve and price < reserve then
      price = reserve
    end
    amount = amount or price
    local myseq = add_row(id, bidder, amount, kind, value, outbid, outbid_max)
    if leading == 0 then
      add_row(auto_id(id), leader, price, 'automatic', 0)
    end
    local rec = int(myseq) .. '|' .. int(now) .. '|' .. int(end_us) .. '|' .. bidder .. '|' .. int(amount)
    if kind ~= 'straight' or leading == 0 then -- else the short form: straight, leading, at its amount
      rec = rec .. '|' .. kind .. '|' .. int(kind == 'proxy' and value or 0) .. '|' .. leading .. '|' .. int(price)
    end
    fresh[id] = rec
    newreqs[#newreqs + 1] = id
    newreqs[#newreqs + 1] = rec
    out[i + 1] = {1, myseq, now, end_us, amount, leading, price}
  end
end

if changed then
  redis.call('HSET', KEYS[1], 'price', int(price), 'leader', leader, 'end_us', int(end_us), 'seq', int(seq),
    'lmax', int(lmax), 'lalias', lalias)
  redis.call('HSET', KEYS[2], unpack(newreqs))
  redis.call('SPUBLISH', ARGV[1], 'u1|' .. ARGV[2] .. '|' .. int(price) .. '|' .. leader .. '|' .. int(end_us) ..
    '|' .. status .. '|' .. int(seq) .. '|' .. int(now) .. '||' .. lalias)
end
out[1] = {price, inc, end_us, status, seq, leader or '', seller or ''}
return out
