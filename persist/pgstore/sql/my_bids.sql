-- A page of the auctions user $1 bid on, newest auction first: ids below $2
-- (0: from the newest), at most $3, in state $4 ('' for all), with the
-- user's highest row and highest proxy maximum in each.
--
-- The state is decided on the row; a hot open auction's leader lives in
-- Redis, so such auctions pass a 'leading' or 'outbid' filter either way
-- and the caller decides them on Redis's state.
WITH mine AS (
    SELECT b.auction_id, max(b.amount) AS highest, max(b.max_amount) AS max_amount
      FROM bid b
     WHERE b.bidder_id = $1 AND ($2::bigint = 0 OR b.auction_id < $2::bigint)
     GROUP BY b.auction_id
),
stated AS (
    SELECT m.*, a.*,
           CASE WHEN a.status = 'CANCELLED' THEN 'cancelled'
                WHEN a.status = 'CLOSED' AND a.leader_id = $1
                 AND (a.reserve_price IS NULL OR a.current_price >= a.reserve_price) THEN 'won'
                WHEN a.status = 'CLOSED' THEN 'lost'
                WHEN a.leader_id = $1 THEN 'leading'
                ELSE 'outbid' END AS state
      FROM mine m
     -- LATERAL: one primary-key probe per group, in the groups' order,
     -- never a scan of every auction merged with the user's (OFFSET 0
     -- keeps the planner from flattening it into one).
     CROSS JOIN LATERAL (SELECT * FROM auction x WHERE x.id = m.auction_id OFFSET 0) a
)
SELECT id, seller_id, title, start_price, current_price, min_increment, leader_id,
       status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
       EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
       COALESCE(leader_max, 0), buy_now_price, highest, max_amount
  FROM stated
 WHERE $4::text = '' OR state = $4::text
    OR ($4::text IN ('leading', 'outbid') AND mode = 'HOT' AND status = 'OPEN')
 ORDER BY auction_id DESC
 LIMIT $3
