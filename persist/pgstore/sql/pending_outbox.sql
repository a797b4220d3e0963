-- The oldest unpublished events of one topic. SKIP LOCKED lets several
-- relays run at once, each on its own rows; the locks last until the rows
-- are marked published (or the relay gives up and rolls back).
SELECT id, aggregate_id, payload
  FROM outbox
 WHERE published_at IS NULL
   AND topic = $1
 ORDER BY id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
