-- The oldest unpublished events of one topic, from outbox_pending. SKIP
-- LOCKED lets several relays run at once, each on its own entries; the
-- locks last until the rows are marked published (or the relay gives up
-- and rolls back).
--
-- `delivered`: a row marked published without being sent. A
-- bid-notifications row whose notice is stored already (the notifier
-- would skip it as known): a close's notices are stored by the closer
-- itself, and an outbid's often by the notifier from the relay's fast
-- copy, before their rows are read. Other topics' rows are never stored
-- notices. And a row with nothing left to send: published already (by a
-- previous version's relay, during a rolling upgrade) or gone (deleted by
-- hand); marking it only removes its entry.
--
-- One index probe per row, whatever the statistics: written as an EXISTS,
-- the planner hashed the whole notification table for a pass it expected
-- to be long (a sequential scan of 12-27 ms per pass under a three-node
-- flash sale, for a dozen rows). OFFSET 0 keeps the lateral subquery from
-- being flattened into a join the planner could turn into that scan.
SELECT p.id, coalesce(o.aggregate_id, 0), coalesce(o.payload, '{}'),
       o.id IS NULL OR o.published_at IS NOT NULL OR d.stored IS NOT NULL AS delivered
  FROM outbox_pending p
  LEFT JOIN outbox o ON o.id = p.id
  LEFT JOIN LATERAL (
        SELECT true AS stored
          FROM notification n
         WHERE p.topic = 'bid-notifications' AND n.id = o.payload->>'id'
        OFFSET 0) d ON true
 WHERE p.topic = $1
 ORDER BY p.topic, p.id
 LIMIT $2
   FOR UPDATE OF p SKIP LOCKED
