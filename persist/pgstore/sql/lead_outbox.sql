-- Makes this session the outbox relay of topic $1 that listens, if no
-- other session is: a session lock, held until unlock_outbox.sql or the
-- session's end (a crashed node's connection closes, and the lock is free
-- for the next relay to try). The pair (constant, hashtext) lives apart
-- from the single-key locks of lock_notices.sql and the migrations.
SELECT pg_try_advisory_lock(1651076143, hashtext($1::text)) -- "bidgate outbox relay", topic
