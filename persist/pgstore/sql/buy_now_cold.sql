-- Buy-now on a cold auction, in one statement under the row lock the bids
-- take: while it is open, before its end by the database clock, has a
-- buy-now price and no accepted bid, it closes at that price with the buyer
-- as winner, its end set to now, and the buy-now row recorded. The caller
-- adds the auction-closed event in the same transaction. A repeated request
-- id makes the INSERT fail with a unique violation, which undoes the close.
-- $1 auction, $2 buyer, $3 request id.
WITH locked AS (
    SELECT id
      FROM auction
     WHERE id = $1
       AND status = 'OPEN'
       AND mode = 'COLD'
       AND seller_id <> $2
       AND buy_now_price IS NOT NULL
       AND bid_count = 0
       FOR UPDATE
),
t AS (
    SELECT clock_timestamp() AS now FROM locked
),
bought AS (
    UPDATE auction a
       SET (status, current_price, leader_id, leader_max, bid_count, end_time, last_bid_at, closed_at) = (
           'CLOSED', a.buy_now_price, $2::bigint, a.buy_now_price, 1, t.now, t.now, t.now)
      FROM t
     WHERE a.id = $1
       AND a.end_time > t.now
 RETURNING a.id, a.leader_id, a.current_price, a.bid_count, a.end_time, a.closed_at, a.reserve_price
),
row AS (
    INSERT INTO bid (auction_id, bidder_id, amount, kind, request_id, seq, accepted_at, end_time)
    SELECT id, leader_id, current_price, 'buy_now', $3, 1, end_time, end_time
      FROM bought
),
alias AS (
    -- The buyer is the auction's only bidder.
    INSERT INTO bidder_alias (auction_id, bidder_id, alias)
    SELECT id, leader_id, 1 FROM bought
)
SELECT id, leader_id, current_price, bid_count, end_time, closed_at, reserve_price
  FROM bought
