-- For each given bid ($1..$7, one array per column, in order), whether a
-- row of its auction holds its seq, and whether every such row is that bid:
-- the same request, bidder, amount, kind and maximum. Bids whose seq no
-- row holds are absent from the result.
SELECT u.ord,
       bool_and(b.request_id = u.request_id AND b.bidder_id = u.bidder_id AND b.amount = u.amount
                AND b.kind = u.kind AND b.max_amount IS NOT DISTINCT FROM u.max_amount)
  FROM unnest($1::bigint[], $2::bigint[], $3::uuid[], $4::bigint[], $5::numeric[], $6::text[], $7::numeric[])
       WITH ORDINALITY AS u(auction_id, seq, request_id, bidder_id, amount, kind, max_amount, ord)
  JOIN bid b ON b.auction_id = u.auction_id AND b.seq = u.seq
 GROUP BY u.ord
