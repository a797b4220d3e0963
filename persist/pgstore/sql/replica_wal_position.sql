-- Whether the server is a standby, and the WAL position it has replayed up
-- to (NULL on a server that is not one): what its readers see.
SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint
