-- Marks the rows $2 of topic $1 published: their pending entries go, and
-- the rows keep the time (pruning and the notice sweep read it). A row a
-- previous version's relay marked already keeps its time.
WITH done AS (
    DELETE FROM outbox_pending WHERE topic = $1 AND id = ANY($2::bigint[])
    RETURNING id
)
UPDATE outbox SET published_at = clock_timestamp()
 WHERE id IN (SELECT id FROM done)
   AND published_at IS NULL
