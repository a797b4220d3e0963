-- Stores notices as the notifier reads them from bid-notifications; one
-- already stored (the same cause delivered again) is skipped. Answers the
-- ids stored now, so that only those are published.
INSERT INTO notification (id, user_id, type, auction_id, title, price, max_amount, at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::numeric[], $7::numeric[], $8::timestamptz[])
ON CONFLICT (id) DO NOTHING
RETURNING id
