-- The bid rows of the browse auctions with ids $1 .. $2 (see
-- browse_auctions.sql): seq 1 .. bid_count each, 2 to 6 bidders of $3 + 1 ..
-- $3 + $4 taking turns, a minute apart from the auction's creation.
INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time, kind)
SELECT a.id, $3::bigint + 1 + (a.id * 7919 + (s % (2 + a.id % 5)) * 104729) % $4::int, a.start_price + s * a.min_increment,
       gen_random_uuid(), s, a.created_at + s * INTERVAL '1 minute', a.end_time, 'straight'
  FROM auction a CROSS JOIN LATERAL generate_series(1, a.bid_count) AS s
 WHERE a.id BETWEEN $1::bigint AND $2::bigint
