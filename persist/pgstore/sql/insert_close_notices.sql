-- The notices of closed auctions (bidgate.Notice), as outbox rows of
-- bid-notifications, in the closing transaction: `won` to the winner,
-- `lost` to every other bidder, `sold` (a winner) or `unsold` (none, or
-- below the reserve) to the seller. Each carries the final price, the
-- close's time, and to a bidder the most they offered (their highest proxy
-- maximum or straight bid).
-- Answers the notices, for the closer to store and publish right after the
-- commit: a hot close tells thousands of bidders, more than the Kafka path
-- delivers within a second (the notifier skips the copies it finds stored).
-- $1 auctions, $2 winners (0: nobody won), $3 final prices, $4 closing times.
WITH c AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::numeric[], $4::timestamptz[]) AS c(auction_id, winner, price, at)
),
a AS (
    SELECT c.*, x.seller_id, x.title,
           to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at_text
      FROM c JOIN auction x ON x.id = c.auction_id
),
bidders AS (
    SELECT a.auction_id, b.bidder_id, max(COALESCE(b.max_amount, b.amount)) AS max_amount
      FROM a JOIN bid b ON b.auction_id = a.auction_id
     GROUP BY a.auction_id, b.bidder_id
),
notices AS (
    SELECT bd.bidder_id AS user_id,
           CASE WHEN bd.bidder_id = a.winner THEN 'won' ELSE 'lost' END AS type,
           CASE WHEN bd.bidder_id = a.winner THEN 'won-' || a.auction_id
                ELSE 'lost-' || a.auction_id || '-' || bd.bidder_id END AS id,
           a.auction_id, a.title, a.price, bd.max_amount, a.at_text, a.at
      FROM a JOIN bidders bd ON bd.auction_id = a.auction_id
    UNION ALL
    SELECT a.seller_id, CASE WHEN a.winner <> 0 THEN 'sold' ELSE 'unsold' END,
           CASE WHEN a.winner <> 0 THEN 'sold-' ELSE 'unsold-' END || a.auction_id,
           a.auction_id, a.title, a.price, NULL, a.at_text, a.at
      FROM a
),
outboxed AS (
    INSERT INTO outbox (topic, aggregate_id, payload)
    SELECT 'bid-notifications', n.user_id,
           jsonb_strip_nulls(jsonb_build_object('id', n.id, 'type', n.type, 'userId', n.user_id, 'auctionId', n.auction_id,
               'title', n.title, 'price', n.price::numeric(14,2)::text, 'maxAmount', n.max_amount::numeric(14,2)::text, 'at', n.at_text))
      FROM notices n
)
SELECT id, user_id, type, auction_id, title, price::numeric(14,2)::text,
       COALESCE(max_amount::numeric(14,2)::text, ''), at
  FROM notices
