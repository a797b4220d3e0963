-- The cold bid: check and write in one statement.
--
-- `locked` takes the auction's row lock first. A concurrent bid waits for it
-- and, under READ COMMITTED, re-evaluates the conditions on the newest row
-- version, so no update is ever lost. Only then is the clock read, once:
-- the end-time check, the anti-sniping extension and the acceptance time
-- all use that one instant, so a pause between two clock reads can never
-- accept a bid "before the end" and record it after. clock_timestamp(), not
-- now(): now() is the transaction's start. The extension never shortens.
-- A seller never bids on their own auction.
-- A repeated request id makes the INSERT fail with a unique violation,
-- which undoes the UPDATE with it.
WITH locked AS (
    SELECT id
      FROM auction
     WHERE id = $1
       AND status = 'OPEN'
       AND mode = 'COLD'
       AND seller_id <> $2
       AND $3::numeric >= current_price + min_increment
       FOR UPDATE
),
t AS (
    SELECT clock_timestamp() AS now FROM locked
),
accepted AS (
    UPDATE auction a
       SET (current_price, leader_id, bid_count, end_time, last_bid_at) = (
           $3::numeric, $2::bigint, a.bid_count + 1,
           CASE WHEN a.end_time - t.now < a.extend_window
                THEN GREATEST(a.end_time, LEAST(t.now + a.extend_by, COALESCE(a.max_end_time, 'infinity')))
                ELSE a.end_time END,
           t.now)
      FROM t
     WHERE a.id = $1
       AND a.status = 'OPEN'
       AND a.mode = 'COLD'
       AND a.end_time > t.now
       AND $3::numeric >= a.current_price + a.min_increment
 RETURNING a.id, a.bid_count, a.end_time, a.last_bid_at
)
INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
SELECT id, $2, $3::numeric, $4, bid_count, last_bid_at, end_time
  FROM accepted
RETURNING seq, accepted_at, end_time
