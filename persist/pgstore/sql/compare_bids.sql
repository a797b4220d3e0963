-- For each given bid ($1..$7, one array per column, in order), whether a
-- row of its auction holds its seq, and whether every such row is that bid:
-- the same request, bidder, amount, kind and maximum. Bids whose seq no
-- row holds are absent from the result.
--
-- One probe of the (auction_id, seq) index per bid, whatever the batch's
-- size: as a join, a reconciler's batch of a few hundred bids was hashed
-- against a sequential scan of the whole bid table, a pass that grew with
-- every bid ever written (24 ms for 900 bids over 40,000 rows). OFFSET 0
-- keeps the lateral subquery from being flattened back into that join.
SELECT u.ord,
       bool_and(b.request_id = u.request_id AND b.bidder_id = u.bidder_id AND b.amount = u.amount
                AND b.kind = u.kind AND b.max_amount IS NOT DISTINCT FROM u.max_amount)
  FROM unnest($1::bigint[], $2::bigint[], $3::uuid[], $4::bigint[], $5::numeric[], $6::text[], $7::numeric[])
       WITH ORDINALITY AS u(auction_id, seq, request_id, bidder_id, amount, kind, max_amount, ord)
 CROSS JOIN LATERAL (
       SELECT b.request_id, b.bidder_id, b.amount, b.kind, b.max_amount
         FROM bid b
        WHERE b.auction_id = u.auction_id AND b.seq = u.seq
       OFFSET 0) b
 GROUP BY u.ord
