-- The notices that closes owe (close_notice rows of auctions $1), as
-- bidgate.Notice: `won` to the winner, `lost` to every other bidder,
-- `sold` (a winner) or `unsold` (none, or below the reserve) to the seller.
-- Each carries the final price, the close's time, and to a bidder the most
-- they offered (their highest proxy maximum or straight bid).
WITH a AS (
    SELECT c.auction_id, c.winner, c.price, c.at, x.seller_id, x.title
      FROM close_notice c JOIN auction x ON x.id = c.auction_id
     WHERE c.auction_id = ANY($1)
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
           a.auction_id, a.title, a.price, bd.max_amount, a.at
      FROM a JOIN bidders bd ON bd.auction_id = a.auction_id
    UNION ALL
    SELECT a.seller_id, CASE WHEN a.winner <> 0 THEN 'sold' ELSE 'unsold' END,
           CASE WHEN a.winner <> 0 THEN 'sold-' ELSE 'unsold-' END || a.auction_id,
           a.auction_id, a.title, a.price, NULL, a.at
      FROM a
)
SELECT id, user_id, type, auction_id, title, price::numeric(14,2)::text,
       COALESCE(max_amount::numeric(14,2)::text, ''), at
  FROM notices
