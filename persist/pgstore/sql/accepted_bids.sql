SELECT bidder_id, amount, kind, max_amount, request_id, seq, accepted_at, end_time
  FROM bid
 WHERE auction_id = $1
 ORDER BY seq
