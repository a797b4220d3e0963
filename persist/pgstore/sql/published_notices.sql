-- The bid-notifications outbox rows after the sweep's cursor ($2), in id
-- order, up to the first one not yet published (it has not reached Kafka
-- and will, so it is no loss yet): each with whether it was published more
-- than $3 seconds ago (the notifier had its time to store it) and whether
-- its notice is stored.
SELECT o.id, o.payload,
       o.published_at < clock_timestamp() - make_interval(secs => $3::double precision) AS settled,
       EXISTS (SELECT 1 FROM notification n WHERE n.id = o.payload->>'id') AS stored
  FROM outbox o
 WHERE o.topic = $1
   AND o.id > $2
   AND o.id < coalesce((SELECT min(u.id) FROM outbox u WHERE u.published_at IS NULL AND u.topic = $1), 9223372036854775807)
 ORDER BY o.id
 LIMIT $4
