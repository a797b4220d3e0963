-- A seller cancels a cold auction: only while it is open, before its end by
-- the database clock, and before its first bid. The row lock serializes
-- this with the bids, so a bid and a cancel never both succeed.
UPDATE auction
   SET status = 'CANCELLED', closed_at = clock_timestamp()
 WHERE id = $1
   AND status = 'OPEN'
   AND mode = 'COLD'
   AND bid_count = 0
   AND end_time > clock_timestamp()
RETURNING id, seller_id, closed_at
