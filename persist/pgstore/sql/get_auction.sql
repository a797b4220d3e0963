SELECT id, seller_id, title, start_price, current_price, min_increment, leader_id,
       status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
       EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
       COALESCE(leader_max, 0), buy_now_price
  FROM auction
 WHERE id = $1
