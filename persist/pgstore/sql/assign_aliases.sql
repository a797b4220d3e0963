-- After hot rows were written and persisted_seq advanced (in the same
-- transaction, the auctions locked): gives every bidder whose first row
-- lies in the newly persisted range (from $2 to $3 of auction $1, each an
-- array) and has no alias the next aliases of that auction, in the order of
-- their first rows.
--
-- One probe of bidder_alias's key per row and a range scan of the bids by
-- (auction_id, seq), whatever the statistics: as a join, the planner
-- expected a thousand rows per range and hashed the whole alias table
-- against an index walk of all the auction's bids (9.9 ms for 48 bids over
-- 31,000 aliases, 4.5 ms a call in a one-node flash sale, for 1.7 ms).
-- OFFSET 0 keeps both subqueries apart; the ORDER BY asks for the seq
-- index.
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(auction_id, from_seq, to_seq)
),
firsts AS (
    SELECT b.auction_id, b.bidder_id, min(b.seq) AS first_seq
      FROM r
      CROSS JOIN LATERAL (
            SELECT b.auction_id, b.bidder_id, b.seq
              FROM bid b
             WHERE b.auction_id = r.auction_id AND b.seq > r.from_seq AND b.seq <= r.to_seq
             ORDER BY b.seq
            OFFSET 0) b
     WHERE NOT EXISTS (SELECT 1 FROM bidder_alias x WHERE x.auction_id = b.auction_id AND x.bidder_id = b.bidder_id OFFSET 0)
     GROUP BY b.auction_id, b.bidder_id
)
INSERT INTO bidder_alias (auction_id, bidder_id, alias)
SELECT f.auction_id, f.bidder_id,
       COALESCE((SELECT max(x.alias) FROM bidder_alias x WHERE x.auction_id = f.auction_id), 0)
         + row_number() OVER (PARTITION BY f.auction_id ORDER BY f.first_seq)
  FROM firsts f
