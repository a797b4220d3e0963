-- An auction's state (its seller never changes) and the bid an earlier
-- request with the same key made, if any, with the automatic row that
-- answered it ($3: its derived request id). Prices only rise and an end
-- once passed stays passed, so whatever this snapshot rejects stays
-- rejected.
SELECT a.status, a.mode, a.end_time > clock_timestamp(), a.current_price, a.min_increment, a.seller_id,
       a.leader_id, COALESCE(a.leader_max, 0), a.buy_now_price IS NOT NULL AND a.bid_count = 0,
       b.bidder_id, b.amount, b.kind, b.max_amount, b.seq, b.accepted_at, b.end_time, x.amount
  FROM auction a
  LEFT JOIN bid b ON b.auction_id = a.id AND b.request_id = $2
  LEFT JOIN bid x ON x.auction_id = a.id AND x.request_id = $3 AND b.request_id IS NOT NULL
 WHERE a.id = $1
