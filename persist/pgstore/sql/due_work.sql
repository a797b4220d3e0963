-- What a close pass has to do, in one round trip: whether an open cold
-- auction's end has passed, whether an open hot one's has (by the database
-- clock, as close_cold.sql and due_hot.sql judge it), and whether a close
-- still owes its notices $1 seconds after it committed
-- (left_close_notices.sql). Nothing is locked: a row another closer holds
-- still counts, and the pass that follows skips it as it would have.
--
-- The earliest end of each mode rather than EXISTS (... end_time <= now):
-- the planner cannot see the clock's value, and for an EXISTS it expected
-- a third of the open auctions to match and scanned the table for one
-- (3 ms over 20,000 auctions); min() reads the first entry of
-- idx_auction_open_end (cold) or the few of idx_auction_hot_open (hot).
SELECT COALESCE((SELECT min(end_time) FROM auction WHERE status = 'OPEN' AND mode = 'COLD') <= clock_timestamp(), false),
       COALESCE((SELECT min(end_time) FROM auction WHERE status = 'OPEN' AND mode = 'HOT') <= clock_timestamp(), false),
       EXISTS (SELECT 1
                 FROM close_notice
                WHERE created_at < clock_timestamp() - make_interval(secs => $1::double precision))
