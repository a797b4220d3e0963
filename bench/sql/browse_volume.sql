-- The browse volume already in the database: the auctions of sellers $1+1 ..
-- $1+$2, their id range and their bids.
SELECT COALESCE(min(id), 0), COALESCE(max(id), 0), count(*), COALESCE(sum(bid_count), 0)::bigint
  FROM auction
 WHERE seller_id > $1::bigint AND seller_id <= $1::bigint + $2::int
