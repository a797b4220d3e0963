-- Hot auctions whose bids may still be missing from PostgreSQL, with how
-- far they are persisted without a gap: the open ones, and those closed
-- recently (the closer settles a hot auction only once all its bids are
-- here, so this is a second look, not the guarantee).
SELECT id, persisted_seq FROM auction WHERE mode = 'HOT' AND status = 'OPEN'
UNION ALL
SELECT id, persisted_seq FROM auction WHERE mode = 'HOT' AND status = 'CLOSED'
   AND closed_at > clock_timestamp() - $1::bigint * INTERVAL '1 second'
