-- What a close pass has to do, in one round trip: whether an open cold
-- auction's end has passed, whether an open hot one's has (by the database
-- clock read once, as close_cold.sql and due_hot.sql judge it), and whether
-- a close still owes its notices $1 seconds after it committed
-- (left_close_notices.sql). Nothing is locked: a row another closer holds
-- still counts, and the pass that follows skips it as it would have.
--
-- min() over the ended ones rather than EXISTS: the planner cannot see the
-- clock's value, and for an EXISTS it expected a third of the open
-- auctions to have ended and scanned the table for one; min() reads
-- idx_auction_open_end in order, from the earliest end, and stops at the
-- clock. Without the bound, statistics older than a bulk insert had it
-- read every open cold auction before the first hot one.
SELECT (SELECT min(end_time)
          FROM auction
         WHERE status = 'OPEN'
           AND mode = 'COLD'
           AND end_time <= (SELECT clock_timestamp())) IS NOT NULL,
       (SELECT min(end_time)
          FROM auction
         WHERE status = 'OPEN'
           AND mode = 'HOT'
           AND end_time <= (SELECT clock_timestamp())) IS NOT NULL,
       EXISTS (SELECT 1
                 FROM close_notice
                WHERE created_at < clock_timestamp() - make_interval(secs => $1::double precision))
