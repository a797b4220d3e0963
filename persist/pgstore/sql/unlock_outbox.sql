-- Gives up the lead of lead_outbox.sql, before the connection goes back to
-- the pool.
SELECT pg_advisory_unlock(1651076143, hashtext($1::text))
