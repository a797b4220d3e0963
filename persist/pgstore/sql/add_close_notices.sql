-- Records in the closing transaction that closes owe their notices
-- (table close_notice): $1 auctions, $2 winners (0: nobody won), $3 final
-- prices, $4 closing times.
INSERT INTO close_notice (auction_id, winner, price, at)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::numeric[], $4::timestamptz[])
ON CONFLICT (auction_id) DO NOTHING
