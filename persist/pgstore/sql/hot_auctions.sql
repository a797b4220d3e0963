-- Hot auctions whose logs the relay follows: open ones, and closed ones for
-- a while after closing, so that their last bids are relayed too.
SELECT id FROM auction WHERE mode = 'HOT' AND status = 'OPEN'
UNION ALL
SELECT id FROM auction WHERE mode = 'HOT' AND status = 'CLOSED'
   AND closed_at > clock_timestamp() - $1::bigint * INTERVAL '1 second'
