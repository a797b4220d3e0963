-- How many events of a topic wait, and for how long the oldest has waited.
SELECT count(*),
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8
  FROM outbox
 WHERE published_at IS NULL
   AND topic = $1
