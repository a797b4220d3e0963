-- The outbid notices of newly written hot rows that took the lead, one
-- array per column: auction $1, seq $2, the leader the row replaced $3 and
-- their maximum $4, the row's amount $5 (a leading row stands at the new
-- price) and time $6. Each goes through the outbox in the writing
-- transaction, for the notifier to store (QueueOutbidNotices: the closer's
-- and the reconciler's writes), unless the notice is stored already (the
-- previous version's relays sent a copy of their own). OFFSET 0 keeps that
-- one probe of the id index per row, statistics or none. Wakes the
-- bid-notifications relays when it commits.
WITH noticed AS (
    INSERT INTO outbox (topic, aggregate_id, payload)
    SELECT 'bid-notifications', n.outbid, jsonb_build_object(
               'id', 'outbid-' || n.auction_id || '-' || n.seq, 'type', 'outbid', 'userId', n.outbid,
               'auctionId', n.auction_id, 'title', a.title, 'price', n.amount::numeric(14,2)::text,
               'maxAmount', n.outbid_max::numeric(14,2)::text,
               'at', to_char(n.accepted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
      FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::numeric[], $5::numeric[], $6::timestamptz[])
           AS n(auction_id, seq, outbid, outbid_max, amount, accepted_at)
      JOIN auction a ON a.id = n.auction_id
     WHERE NOT EXISTS (SELECT 1 FROM notification nt WHERE nt.id = 'outbid-' || n.auction_id || '-' || n.seq OFFSET 0)
    RETURNING id
)
SELECT count(*) FROM (SELECT 1 FROM noticed LIMIT 1) x CROSS JOIN LATERAL pg_notify('outbox:bid-notifications', '')
