-- Locks the close_notice rows of auctions $1 until the transaction ends,
-- skipping those another closer holds: one writes a close's notices to the
-- outbox, once.
SELECT auction_id
  FROM close_notice
 WHERE auction_id = ANY($1)
 ORDER BY auction_id
   FOR UPDATE SKIP LOCKED
