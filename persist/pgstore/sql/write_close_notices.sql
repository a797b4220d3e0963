-- Writes close notices to the outbox of bid-notifications (payloads $3,
-- bidgate.Notice JSON keyed by user $2) and deletes the close_notice rows
-- of their auctions $1, which the transaction holds locked.
WITH done AS (
    DELETE FROM close_notice WHERE auction_id = ANY($1)
)
INSERT INTO outbox (topic, aggregate_id, payload)
SELECT 'bid-notifications', n.user_id, n.payload
  FROM unnest($2::bigint[], $3::jsonb[]) AS n(user_id, payload)
