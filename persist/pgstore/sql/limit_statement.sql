-- Bounds the rest of the transaction inside PostgreSQL: how long a
-- statement waits for a lock (lock_timeout) and runs (statement_timeout).
-- Past either the server cancels the statement and rolls the transaction
-- back, whether or not its client is still there to hear it. $1 is the limit
-- in milliseconds, as text.
SELECT set_config('lock_timeout', $1::text || 'ms', true), set_config('statement_timeout', $1::text || 'ms', true)
