-- The end time is checked against the database clock, the one every later
-- decision about this auction uses. No row back means out of range.
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment,
                     mode, end_time, extend_window, extend_by, max_end_time, reserve_price, buy_now_price)
SELECT $1, $2, $3, $3, $4, $5, $6::timestamptz,
       $7::bigint * INTERVAL '1 second', $8::bigint * INTERVAL '1 second', $10::timestamptz, $11::numeric, $12::numeric
 WHERE $6::timestamptz > clock_timestamp()
   AND $6::timestamptz <= clock_timestamp() + $9::bigint * INTERVAL '1 second'
   AND ($10::timestamptz IS NULL OR $10::timestamptz <= clock_timestamp() + $9::bigint * INTERVAL '1 second')
RETURNING id, seller_id, title, start_price, current_price, min_increment, leader_id,
          status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
          EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
          COALESCE(leader_max, 0), buy_now_price
