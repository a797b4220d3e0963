-- Where the primary's WAL is written up to, as a byte position: every
-- transaction committed so far is at or below it.
SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint
