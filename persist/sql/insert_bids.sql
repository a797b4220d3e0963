-- A batch of hot bids from Kafka. Duplicates (redelivery, a relay that
-- produced twice) meet the unique key and are skipped: at-least-once in,
-- exactly-once effect. A bid naming no known auction cannot come from a
-- relay; it is dropped rather than left to block its partition.
INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
SELECT u.*
  FROM unnest($1::bigint[], $2::bigint[], $3::numeric[], $4::uuid[],
              $5::bigint[], $6::timestamptz[], $7::timestamptz[])
       AS u(auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
 WHERE EXISTS (SELECT 1 FROM auction a WHERE a.id = u.auction_id)
ON CONFLICT (auction_id, request_id) DO NOTHING
