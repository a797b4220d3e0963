-- Stores the outbid notices of newly written hot rows that took the lead,
-- one array per column: auction $1, seq $2, the leader the row replaced $3
-- and their maximum $4, the row's amount $5 (a leading row stands at the
-- new price) and time $6. A notice stored already (written again by
-- another writer of the row, or by an older version's notifier) is
-- skipped. Answers the notices stored now, for the writer to push after
-- it commits. The caller holds lock_notices.sql.
INSERT INTO notification (id, user_id, type, auction_id, title, price, max_amount, at)
SELECT 'outbid-' || n.auction_id || '-' || n.seq, n.outbid, 'outbid', n.auction_id, a.title,
       n.amount, n.outbid_max, n.accepted_at
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::numeric[], $5::numeric[], $6::timestamptz[])
       AS n(auction_id, seq, outbid, outbid_max, amount, accepted_at)
  JOIN auction a ON a.id = n.auction_id
ON CONFLICT (id) DO NOTHING
RETURNING id, user_id, auction_id, title, price, max_amount, at
