-- The bid-notifications outbox rows after the sweep's cursor ($2), in id
-- order, up to the first one not settled: not yet published (it has not
-- reached Kafka and will, so it is no loss yet) or published less than $3
-- seconds ago (the notifier has not had its time to store it). Each comes
-- with whether its notice is stored.
--
-- `next` reads at most $4 rows' times; only the settled ones are looked up
-- and returned. A sweep every 2 s with a 10 s grace meets each row about
-- five times before it settles, and looking every notice up each time (the
-- id out of the payload, an index probe, the payload sent) made the
-- sweep's statement 8 % of PostgreSQL's time with three notifiers.
WITH next AS (
    SELECT o.id, coalesce(o.published_at < clock_timestamp() - make_interval(secs => $3::double precision), false) AS settled
      FROM outbox o
     WHERE o.topic = $1
       AND o.id > $2
       AND o.id < coalesce((SELECT min(p.id) FROM outbox_pending p WHERE p.topic = $1), 9223372036854775807)
     ORDER BY o.id
     LIMIT $4
)
SELECT o.id, o.payload, EXISTS (SELECT 1 FROM notification n WHERE n.id = o.payload->>'id') AS stored
  FROM next
  JOIN outbox o ON o.id = next.id
 WHERE next.id < coalesce((SELECT min(x.id) FROM next x WHERE NOT x.settled), 9223372036854775807)
 ORDER BY o.id
