-- One auction, with its leader's alias (bidder_alias); 0 when nobody leads
-- or the leader's first row is not in the gap-free prefix yet (a hot
-- auction's, whose live alias is Redis's).
SELECT id, seller_id, title, start_price, current_price, min_increment, leader_id,
       status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
       EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
       COALESCE(leader_max, 0), buy_now_price,
       COALESCE((SELECT x.alias FROM bidder_alias x WHERE x.auction_id = a.id AND x.bidder_id = a.leader_id), 0)
  FROM auction a
 WHERE id = $1
