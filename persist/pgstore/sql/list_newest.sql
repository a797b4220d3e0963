-- GET /auctions?sort=newest and GET /me/auctions: newest first
-- (idx_auction_list_newest, idx_auction_seller_newest).
SELECT id, seller_id, title, start_price, current_price, min_increment, leader_id,
       status, mode, end_time, EXTRACT(EPOCH FROM extend_window)::bigint,
       EXTRACT(EPOCH FROM extend_by)::bigint, bid_count, created_at, max_end_time, reserve_price,
       COALESCE(leader_max, 0), buy_now_price
  FROM auction
-- Parameters $1-$6 are the filters, NULL when not given; the statement
-- runs unprepared (a custom plan each time), so PostgreSQL folds
-- "$n IS NULL OR ..." away and picks the index of the filters given.
-- $7, $8: the previous page's last sort value and id (NULL: first page).
-- $9: the page size.
 WHERE ($1::text IS NULL OR status = $1)
   AND ($2::bigint IS NULL OR seller_id = $2)
   AND ($3::text IS NULL OR title_tsv @@ websearch_to_tsquery('simple', $3))
   AND ($4::timestamptz IS NULL OR end_time >= $4)
   AND ($5::timestamptz IS NULL OR end_time < $5)
   AND ($6::boolean IS NULL OR mode = CASE WHEN $6 THEN 'HOT' ELSE 'COLD' END)
   AND ($8::bigint IS NULL OR (created_at, id) < ($7::timestamptz, $8))
 ORDER BY created_at DESC, id DESC
 LIMIT $9
