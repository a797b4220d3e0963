-- The oldest unpublished events of one topic. SKIP LOCKED lets several
-- relays run at once, each on its own rows; the locks last until the rows
-- are marked published (or the relay gives up and rolls back).
--
-- `delivered`: a bid-notifications row whose notice is stored already,
-- marked published without being sent (the notifier would skip it as
-- known). A close's notices are stored by the closer itself, and an
-- outbid's often by the notifier from the relay's fast copy, before their
-- rows are read. Other topics' rows are never delivered.
--
-- One index probe per row, whatever the statistics: written as an EXISTS,
-- the planner hashed the whole notification table for a pass it expected
-- to be long (a sequential scan of 12-27 ms per pass under a three-node
-- flash sale, for a dozen rows). OFFSET 0 keeps the lateral subquery from
-- being flattened into a join the planner could turn into that scan.
SELECT o.id, o.aggregate_id, o.payload, d.stored IS NOT NULL AS delivered
  FROM outbox o
  LEFT JOIN LATERAL (
        SELECT true AS stored
          FROM notification n
         WHERE o.topic = 'bid-notifications' AND n.id = o.payload->>'id'
        OFFSET 0) d ON true
 WHERE o.published_at IS NULL
   AND o.topic = $1
 ORDER BY o.id
 LIMIT $2
   FOR UPDATE OF o SKIP LOCKED
