-- Closes a batch of ended cold auctions in one statement. The end is judged
-- by the database clock read once, in an InitPlan ((SELECT clock_timestamp())),
-- so that it is a constant the partial index idx_auction_open_end can range
-- over; a bare clock_timestamp() is volatile and would make every pass filter
-- all open auctions. SKIP LOCKED leaves rows another closer (or a bid, or a
-- promotion) holds: two closers never take the same auction, and a bid that
-- holds the row commits first and is counted by a later pass. A row changed
-- since the snapshot is re-checked on its newest version (EvalPlanQual), so
-- an extended end or a promotion to HOT drops it from the batch.
WITH due AS (
    SELECT id
      FROM auction
     WHERE status = 'OPEN'
       AND mode = 'COLD'
       AND end_time <= (SELECT clock_timestamp())
     ORDER BY end_time
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE auction a
   SET status = 'CLOSED', closed_at = clock_timestamp()
  FROM due
 WHERE a.id = due.id
   AND a.status = 'OPEN'
RETURNING a.id, a.leader_id, a.current_price, a.bid_count, a.end_time, a.closed_at, a.reserve_price
