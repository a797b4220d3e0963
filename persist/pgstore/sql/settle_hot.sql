-- Settles hot auctions with their final state (Redis's, or the row's own
-- when Redis had none), the end included: bids persisted in this transaction
-- may have raised the row's end to one Redis had since moved. The rows are
-- locked by due_hot.sql in this transaction; status = 'OPEN' keeps a settle
-- from ever running twice. Prices come as text so that no float is involved
-- on the way.
UPDATE auction a
   SET status = 'CLOSED', closed_at = clock_timestamp(),
       current_price = s.price::numeric, leader_id = s.leader, bid_count = s.bid_count,
       end_time = TIMESTAMPTZ 'epoch' + s.end_us * INTERVAL '1 microsecond'
  FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
       AS s(id, price, leader, bid_count, end_us)
 WHERE a.id = s.id
   AND a.status = 'OPEN'
RETURNING a.id, a.leader_id, a.current_price, a.bid_count, a.end_time, a.closed_at, a.reserve_price
