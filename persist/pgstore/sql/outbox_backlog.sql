-- How many events of a topic wait, and for how long the oldest (the first
-- by id) has waited.
SELECT b.n, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - o.created_at), 0)::float8
  FROM (SELECT count(*) AS n, min(id) AS oldest FROM outbox_pending WHERE topic = $1) b
  LEFT JOIN outbox o ON o.id = b.oldest
