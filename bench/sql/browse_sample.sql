-- Up to $3 random auctions with bids among ids $1 .. $2: the histories the
-- browse load reads.
SELECT id FROM auction WHERE id BETWEEN $1::bigint AND $2::bigint AND bid_count > 0 ORDER BY random() LIMIT $3::int
