-- The browse scenario's auctions: $1 of them, sold by sellers $2+1 .. $2+$3,
-- titled with three words of $6 (so that q finds them), one in ten OPEN
-- (ending 1 h to 30 days ahead) and the others CLOSED (ended within a
-- year). Auction id gets random()^6 * $7 bids, so half of them have none and a
-- few have many; its seq n was made by bidder $4 + 1 + (id * 7919 +
-- (n % (2 + id % 5)) * 104729) % $5 (2 to 6 bidders taking turns) at
-- start_price + n * min_increment, which browse_bids.sql writes,
-- so bid_count, persisted_seq, current_price and leader_id agree with the
-- rows. Answers the id range and the volume.
WITH p AS (
    SELECT clock_timestamp() AS now, cardinality($6::text[]) AS words
), rows AS (
    SELECT nextval(pg_get_serial_sequence('auction', 'id')) AS id, g,
           floor($7::float8 * random() ^ 6)::bigint AS bids,
           g % 10 = 0 AS open,
           (1000 + (g % 500) * 100) / 100.0 AS start
      FROM generate_series(1, $1::bigint) AS g -- bigint: g * 7919 passes 2^31
), timed AS (
    SELECT r.*, p.words,
           CASE WHEN r.open THEN p.now - INTERVAL '2 hours' - (r.g % 518400) * INTERVAL '1 second'
                ELSE p.now - INTERVAL '1 hour' - ((r.g * 7919) % 31536000) * INTERVAL '1 second' - INTERVAL '7 days' END AS created,
           CASE WHEN r.open THEN p.now + INTERVAL '1 hour' + ((r.g * 7919) % 2592000) * INTERVAL '1 second'
                ELSE p.now - INTERVAL '1 hour' - ((r.g * 7919) % 31536000) * INTERVAL '1 second' END AS ends
      FROM rows r CROSS JOIN p
), ins AS (
    INSERT INTO auction (id, seller_id, title, start_price, current_price, min_increment, leader_id, leader_max,
                         bid_count, persisted_seq, status, mode, end_time, last_bid_at, created_at, closed_at)
    SELECT id, $2::bigint + 1 + g % $3::int,
           ($6::text[])[1 + floor(random() * words)::int] || ' ' || ($6::text[])[1 + floor(random() * words)::int]
               || ' ' || ($6::text[])[1 + floor(random() * words)::int] || ' #' || g::text,
           start, start + bids, 1.00,
           CASE WHEN bids > 0 THEN $4::bigint + 1 + (id * 7919 + (bids % (2 + id % 5)) * 104729) % $5::int END,
           CASE WHEN bids > 0 THEN start + bids END,
           bids, bids, CASE WHEN open THEN 'OPEN' ELSE 'CLOSED' END, 'COLD', ends,
           CASE WHEN bids > 0 THEN created + bids * INTERVAL '1 minute' END,
           created, CASE WHEN NOT open THEN ends END
      FROM timed
    RETURNING id, bid_count
)
SELECT min(id), max(id), count(*), COALESCE(sum(bid_count), 0)::bigint FROM ins
