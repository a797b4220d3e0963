-- One auction, with its leader's alias: their rank by first row within the
-- gap-free prefix of its rows (auction_bids.sql); 0 when nobody leads or
-- the leader's first row is not there yet (a hot auction's, whose live
-- alias is Redis's).
SELECT id, seller_id, title, start_price, current_price, min_increment, leader_id,
       status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
       EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
       COALESCE(leader_max, 0), buy_now_price,
       (SELECT count(*)
          FROM (SELECT min(b.seq) AS first_seq
                  FROM bid b
                 WHERE b.auction_id = a.id
                   AND b.seq <= CASE a.mode WHEN 'COLD' THEN a.bid_count ELSE a.persisted_seq END
                 GROUP BY b.bidder_id) f
         WHERE f.first_seq <= (SELECT min(b.seq)
                                 FROM bid b
                                WHERE b.auction_id = a.id AND b.bidder_id = a.leader_id
                                  AND b.seq <= CASE a.mode WHEN 'COLD' THEN a.bid_count ELSE a.persisted_seq END))
  FROM auction a
 WHERE id = $1
