-- The sweep's cursor, locked until the transaction ends: one sweep at a
-- time, however many notifiers run.
SELECT swept_upto FROM notice_sweep FOR UPDATE
