-- An auction's state (its seller never changes) and the bid an earlier request with the same key made, if
-- any. Prices only rise and an end once passed stays passed, so whatever this
-- snapshot rejects stays rejected.
SELECT a.status, a.mode, a.end_time > clock_timestamp(), a.current_price, a.min_increment, a.seller_id,
       b.bidder_id, b.amount, b.seq, b.accepted_at, b.end_time
  FROM auction a
  LEFT JOIN bid b ON b.auction_id = a.id AND b.request_id = $2
 WHERE a.id = $1
