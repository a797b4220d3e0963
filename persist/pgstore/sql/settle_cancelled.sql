-- Hot auctions Redis has cancelled (its clock and state decided): the row
-- follows, once.
UPDATE auction
   SET status = 'CANCELLED', closed_at = clock_timestamp()
 WHERE id = ANY($1::bigint[])
   AND status = 'OPEN'
RETURNING id, seller_id, closed_at
