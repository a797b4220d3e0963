-- The cold bid: check, decide and write in one statement.
--
-- `locked` takes the auction's row lock first. A concurrent bid waits for it
-- and, under READ COMMITTED, re-evaluates the conditions on the newest row
-- version, so every decision below is made on the row as it is now and no
-- update is ever lost. Only then is the clock read, once: the end-time
-- check, the anti-sniping extension and the acceptance time all use that
-- one instant, so a pause between two clock reads can never accept a bid
-- "before the end" and record it after. clock_timestamp(), not now(): now()
-- is the transaction's start. The extension never shortens and never passes
-- max_end_time. A seller never bids on their own auction.
--
-- The rules (README "Auction rules"), on value V (a straight bid's amount
-- or a proxy bid's maximum), price P, leader L with hidden maximum Lmax:
--   raise     L's proxy with V > Lmax: Lmax := V, P unchanged.
--   lead      no leader or V > Lmax: the bidder leads with Lmax := V;
--             P := V (straight), P + inc (proxy, no leader),
--             min(V, Lmax + inc) (proxy).
--   answered  V <= Lmax: L's proxy answers with an automatic row at
--             min(Lmax, V + inc); L stays (the earlier maximum wins a tie).
-- Then P jumps to the reserve when the leader's maximum reaches it.
-- L's straight bid and L's proxy with V <= Lmax write nothing (the look-up
-- says why).
--
-- A repeated request id makes the INSERT fail with a unique violation,
-- which undoes the UPDATE with it. The automatic row's request id ($6) is
-- derived from the challenger's (bidgate.AutomaticRequestID).
WITH arg AS (
    SELECT $1::bigint AS auction, $2::bigint AS bidder, $3::numeric AS value,
           $4::uuid AS req, $5::text AS kind, $6::uuid AS auto_req
),
locked AS (
    SELECT a.id, a.title, a.current_price, a.min_increment, a.leader_id, a.leader_max, a.reserve_price
      FROM auction a, arg
     WHERE a.id = arg.auction
       AND a.status = 'OPEN'
       AND a.mode = 'COLD'
       AND a.seller_id <> arg.bidder
       AND arg.value >= a.current_price + a.min_increment
       FOR UPDATE OF a
),
decided AS (
    SELECT l.*, arg.*, clock_timestamp() AS now,
           CASE WHEN l.leader_id = arg.bidder THEN 'raise'
                WHEN l.leader_id IS NULL OR arg.value > l.leader_max THEN 'lead'
                ELSE 'answered' END AS rule
      FROM locked l, arg
     WHERE l.leader_id IS DISTINCT FROM arg.bidder
        OR (arg.kind = 'proxy' AND arg.value > l.leader_max)
),
priced AS (
    SELECT d.*,
           CASE d.rule WHEN 'answered' THEN d.leader_id ELSE d.bidder END AS new_leader,
           CASE d.rule WHEN 'answered' THEN d.leader_max ELSE d.value END AS new_max,
           CASE WHEN d.rule = 'raise' THEN d.current_price
                WHEN d.rule = 'answered' THEN LEAST(d.leader_max, d.value + d.min_increment)
                WHEN d.kind = 'straight' THEN d.value
                WHEN d.leader_id IS NULL THEN d.current_price + d.min_increment
                ELSE LEAST(d.value, d.leader_max + d.min_increment) END AS base_price
      FROM decided d
),
final AS (
    SELECT p.*,
           CASE WHEN p.new_max >= p.reserve_price AND p.base_price < p.reserve_price
                THEN p.reserve_price ELSE p.base_price END AS price
      FROM priced p
),
accepted AS (
    UPDATE auction a
       SET (current_price, leader_id, leader_max, bid_count, end_time, last_bid_at) = (
           f.price, f.new_leader, f.new_max,
           a.bid_count + CASE f.rule WHEN 'answered' THEN 2 ELSE 1 END,
           CASE WHEN a.end_time - f.now < a.extend_window
                THEN GREATEST(a.end_time, LEAST(f.now + a.extend_by, COALESCE(a.max_end_time, 'infinity')))
                ELSE a.end_time END,
           f.now)
      FROM final f
     WHERE a.id = f.auction
       AND a.end_time > f.now
 RETURNING a.bid_count, a.end_time, a.last_bid_at, f.*
),
rows AS (
    INSERT INTO bid (auction_id, bidder_id, amount, kind, max_amount, request_id, seq, accepted_at, end_time)
    SELECT auction, bidder, CASE rule WHEN 'answered' THEN value ELSE price END, kind,
           CASE kind WHEN 'proxy' THEN value END, req,
           bid_count - CASE rule WHEN 'answered' THEN 1 ELSE 0 END, last_bid_at, end_time
      FROM accepted
    UNION ALL
    SELECT auction, leader_id, price, 'automatic', NULL, auto_req, bid_count, last_bid_at, end_time
      FROM accepted
     WHERE rule = 'answered'
    RETURNING seq
),
-- The leader this bid took the lead from is told (bidgate.Notice, through
-- the outbox, in this transaction); a bid the leader's proxy answered took
-- nothing, and a leader's own raise is not a loss.
noticed AS (
    INSERT INTO outbox (topic, aggregate_id, payload)
    SELECT 'bid-notifications', leader_id, jsonb_build_object(
               'id', 'outbid-' || auction || '-' || bid_count, 'type', 'outbid', 'userId', leader_id,
               'auctionId', auction, 'title', title, 'price', price::numeric(14,2)::text, 'maxAmount', leader_max::numeric(14,2)::text,
               'at', to_char(last_bid_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
      FROM accepted
     WHERE rule = 'lead' AND leader_id IS NOT NULL
    RETURNING id
),
-- Wakes the bid-notifications outbox relays when the bid commits.
woken AS (
    SELECT count(*) AS n FROM noticed CROSS JOIN LATERAL pg_notify('outbox:bid-notifications', '')
)
SELECT bid_count - CASE rule WHEN 'answered' THEN 1 ELSE 0 END, last_bid_at, end_time,
       CASE rule WHEN 'answered' THEN value ELSE price END, rule <> 'answered', price, new_leader
  FROM accepted, woken
