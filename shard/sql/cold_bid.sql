-- The cold bid: check and write in one statement. The UPDATE locks the auction
-- row; a concurrent bid waits for it and, under READ COMMITTED, re-evaluates
-- this WHERE clause on the newest row version, so no update is ever lost.
-- clock_timestamp() (not now(), the transaction's start) is read after the
-- lock is held. The SET's sub-select reads the clock once, so the acceptance
-- time and the anti-sniping decision agree; the extension never shortens.
-- A repeated request id makes the INSERT fail with a unique violation, which
-- undoes the UPDATE with it.
WITH accepted AS (
    UPDATE auction a
       SET (current_price, leader_id, bid_count, end_time, last_bid_at) = (
           SELECT $3::numeric, $2::bigint, a.bid_count + 1,
                  CASE WHEN a.end_time - t.now < a.extend_window
                       THEN GREATEST(a.end_time, t.now + a.extend_by)
                       ELSE a.end_time END,
                  t.now
             FROM (SELECT clock_timestamp() AS now) t)
     WHERE a.id = $1
       AND a.status = 'OPEN'
       AND a.mode = 'COLD'
       AND a.end_time > clock_timestamp()
       AND $3::numeric >= a.current_price + a.min_increment
 RETURNING a.id, a.bid_count, a.end_time, a.last_bid_at
)
INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
SELECT id, $2, $3::numeric, $4, bid_count, last_bid_at, end_time
  FROM accepted
RETURNING seq, accepted_at, end_time
