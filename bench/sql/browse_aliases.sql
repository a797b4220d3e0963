-- The bidder aliases of the browse auctions with ids $1 .. $2, as bidgate
-- assigns them: each bidder's rank by their first row in the auction.
INSERT INTO bidder_alias (auction_id, bidder_id, alias)
SELECT f.auction_id, f.bidder_id, row_number() OVER (PARTITION BY f.auction_id ORDER BY f.first_seq)
  FROM (SELECT b.auction_id, b.bidder_id, min(b.seq) AS first_seq
          FROM bid b
         WHERE b.auction_id BETWEEN $1::bigint AND $2::bigint
         GROUP BY b.auction_id, b.bidder_id) f
