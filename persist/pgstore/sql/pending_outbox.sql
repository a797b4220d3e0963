-- The oldest unpublished events of one topic. SKIP LOCKED lets several
-- relays run at once, each on its own rows; the locks last until the rows
-- are marked published (or the relay gives up and rolls back).
--
-- `delivered`: a bid-notifications row whose notice is stored already,
-- marked published without being sent (the notifier would skip it as
-- known). A close's notices are stored by the closer itself, and an
-- outbid's often by the notifier from the relay's fast copy, before their
-- rows are read. Other topics' rows are never delivered.
SELECT id, aggregate_id, payload,
       topic = 'bid-notifications' AND EXISTS (SELECT 1 FROM notification n WHERE n.id = outbox.payload->>'id') AS delivered
  FROM outbox
 WHERE published_at IS NULL
   AND topic = $1
 ORDER BY id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
