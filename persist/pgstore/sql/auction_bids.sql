-- A page of an auction's history, newest first: rows with seq below $2
-- (0: from the newest), at most $3 of them, each with its bidder's alias.
--
-- Only the gap-free prefix of the history is read: every row of a cold
-- auction (written with its row), a hot one's up to persisted_seq (hot rows
-- reach PostgreSQL through the pipeline, in any order). An alias is the
-- bidder's rank by first row within that prefix; the prefix only grows, so
-- an alias, once shown, never changes.
--
-- One row per page row, or one with NULL seq when the auction has none
-- (none: no such auction).
WITH a AS (
    SELECT id, seller_id, CASE mode WHEN 'COLD' THEN bid_count ELSE persisted_seq END AS upto
      FROM auction
     WHERE id = $1
),
firsts AS (
    SELECT b.bidder_id, min(b.seq) AS first_seq
      FROM a JOIN bid b ON b.auction_id = a.id AND b.seq <= a.upto
     GROUP BY b.bidder_id
),
aliases AS (
    SELECT bidder_id, row_number() OVER (ORDER BY first_seq) AS alias FROM firsts
),
page AS (
    SELECT b.seq, b.bidder_id, b.amount, b.kind, b.max_amount, b.accepted_at
      FROM a JOIN bid b ON b.auction_id = a.id
     WHERE b.seq <= a.upto AND ($2::bigint = 0 OR b.seq < $2::bigint)
     ORDER BY b.seq DESC
     LIMIT $3
)
SELECT a.seller_id, p.seq, p.bidder_id, al.alias, p.amount, p.kind, p.max_amount, p.accepted_at
  FROM a
  LEFT JOIN page p ON true
  LEFT JOIN aliases al ON al.bidder_id = p.bidder_id
 ORDER BY p.seq DESC
