-- A page of an auction's history, newest first: rows with seq below $2
-- (0: from the newest), at most $3 of them, each with its bidder's alias.
--
-- Only the gap-free prefix of the history is read: every row of a cold
-- auction (written with its row), a hot one's up to persisted_seq (hot rows
-- reach PostgreSQL through the pipeline, in any order). Every bidder of the
-- prefix has their alias (bidder_alias, assigned with the prefix).
--
-- One row per page row, or one with NULL seq when the auction has none
-- (none: no such auction).
WITH a AS (
    SELECT id, seller_id, CASE mode WHEN 'COLD' THEN bid_count ELSE persisted_seq END AS upto
      FROM auction
     WHERE id = $1
),
page AS (
    -- Walks (auction_id, seq) backwards from the cursor and stops at the
    -- page's end (LATERAL with OFFSET 0: not flattened into a sort of
    -- every row).
    SELECT p.*
      FROM a CROSS JOIN LATERAL (
            SELECT b.seq, b.bidder_id, b.amount, b.kind, b.max_amount, b.accepted_at
              FROM bid b
             WHERE b.auction_id = a.id
               AND b.seq <= LEAST(a.upto, CASE WHEN $2::bigint = 0 THEN a.upto ELSE $2::bigint - 1 END)
             ORDER BY b.seq DESC
             LIMIT $3 OFFSET 0) p
)
SELECT a.seller_id, p.seq, p.bidder_id, al.alias, p.amount, p.kind, p.max_amount, p.accepted_at
  FROM a
  LEFT JOIN page p ON true
  LEFT JOIN bidder_alias al ON al.auction_id = a.id AND al.bidder_id = p.bidder_id
 ORDER BY p.seq DESC
