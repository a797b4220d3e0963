-- The sweep's cursor, locked until the transaction ends: one sweep at a
-- time, however many notifiers run. A notifier that finds it locked skips
-- its pass (no row) rather than wait for the other's: that one is doing
-- the work, and a waiting pass held a connection for nothing.
SELECT swept_upto FROM notice_sweep FOR UPDATE SKIP LOCKED
