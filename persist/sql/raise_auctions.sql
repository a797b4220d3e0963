-- Raises each auction row to its highest bid of the batch; never lowers it,
-- so batches may arrive in any order and twice. bid_count is left to
-- advance_persisted.sql, which counts only bids without a gap before them.
UPDATE auction a
   SET current_price = v.amount,
       leader_id     = v.bidder_id,
       end_time      = GREATEST(a.end_time, v.end_time)
  FROM unnest($1::bigint[], $2::numeric[], $3::bigint[], $4::timestamptz[])
       AS v(auction_id, amount, bidder_id, end_time)
 WHERE a.id = v.auction_id
   AND a.current_price < v.amount
