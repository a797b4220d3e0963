-- Deletes the published outbox rows older than the retention ($1 seconds)
-- among the table's first $2 rows, and answers how many. A
-- bid-notifications row goes only once the notice sweep's cursor has
-- passed it: the sweep reads the rows after the cursor to store the
-- notices Kafka lost.
--
-- The head is read through the primary key: rows are published roughly in
-- id order, so the oldest are first, and a pass reads at most $2 rows
-- however young the table is. Unpublished rows at the head (a topic whose
-- relay cannot reach Kafka) are skipped, not waited for. The conditions are
-- on the row deleted, so that a row republished meanwhile (published_at
-- set back to NULL by an operator) is rechecked and kept. The head is an
-- array, probed row by row: joined as a table, it was hashed against a
-- sequential scan of the whole outbox.
DELETE FROM outbox o
 WHERE o.id = ANY (ARRAY(SELECT id FROM outbox ORDER BY id LIMIT $2))
   AND o.published_at < clock_timestamp() - make_interval(secs => $1::double precision)
   AND (o.topic <> 'bid-notifications' OR o.id <= (SELECT swept_upto FROM notice_sweep))
