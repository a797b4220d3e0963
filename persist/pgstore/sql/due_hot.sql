-- Locks a batch of hot auctions whose PostgreSQL end has passed (by the
-- database clock, read once as in close_cold.sql). The locks are held while
-- Redis, whose clock decides a hot auction, closes or extends each one.
SELECT id, current_price, leader_id, bid_count, end_time, persisted_seq
  FROM auction
 WHERE status = 'OPEN'
   AND mode = 'HOT'
   AND end_time <= (SELECT clock_timestamp())
 ORDER BY end_time
 LIMIT $1
   FOR UPDATE SKIP LOCKED
