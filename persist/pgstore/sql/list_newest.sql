-- GET /auctions?sort=newest and GET /me/auctions: newest first
-- (idx_auction_list_newest, idx_auction_seller_newest).
-- Parameters $1-$6 are the filters, NULL when not given; the statement
-- runs unprepared (a custom plan each time), so PostgreSQL folds
-- "$n IS NULL OR ..." away and picks the index of the filters given.
-- $7, $8: the previous page's last sort value and id (NULL: first page).
-- $9: the page size; $10: how many index entries a search tests in order
-- before it turns to the title index ($9 without q).
--
-- A page is chosen on index columns alone: an index-only scan of the
-- order's covering index (migration 0012), the title tested on the tsvector
-- it carries; only the page's rows are then read. A search (q) walks the
-- order (`walked`, streamed: it stops at the page's last match) for at most
-- $10 entries. When the walk comes up short the words are rare, and the
-- rest (`far`) come from the title's GIN index, sorted: the sort key is an
-- expression the order's index cannot give, which keeps the planner from
-- walking the whole order on an estimate (it guesses a word it has no
-- statistics for, a typo, to be as common as the rarest word it knows).
WITH walked AS NOT MATERIALIZED (
    SELECT id, created_at, ($3::text IS NULL OR title_tsv @@ websearch_to_tsquery('simple', $3)) AS hit
      FROM auction
     WHERE ($1::text IS NULL OR status = $1)
       AND ($2::bigint IS NULL OR seller_id = $2)
       AND ($4::timestamptz IS NULL OR end_time >= $4)
       AND ($5::timestamptz IS NULL OR end_time < $5)
       AND ($6::boolean IS NULL OR mode = CASE WHEN $6 THEN 'HOT' ELSE 'COLD' END)
       AND ($8::bigint IS NULL OR (created_at, id) < ($7::timestamptz, $8))
     ORDER BY created_at DESC, id DESC
     LIMIT $10
),
near AS (
    -- Streamed: the walk stops at the page's last match.
    SELECT id, created_at FROM walked WHERE hit LIMIT $9
),
far AS (
    SELECT id, created_at
      FROM auction
     WHERE (SELECT count(*) FROM near) < $9
       AND title_tsv @@ websearch_to_tsquery('simple', $3)
       AND ($1::text IS NULL OR status = $1)
       AND ($2::bigint IS NULL OR seller_id = $2)
       AND ($4::timestamptz IS NULL OR end_time >= $4)
       AND ($5::timestamptz IS NULL OR end_time < $5)
       AND ($6::boolean IS NULL OR mode = CASE WHEN $6 THEN 'HOT' ELSE 'COLD' END)
       AND (created_at, id) < (SELECT created_at, id FROM walked OFFSET $10 - 1)
     ORDER BY created_at + INTERVAL '0 s' DESC, id DESC
     LIMIT $9
),
page AS (
    SELECT * FROM near UNION ALL SELECT * FROM far ORDER BY created_at DESC, id DESC LIMIT $9
)
SELECT a.id, a.seller_id, a.title, a.start_price, a.current_price, a.min_increment, a.leader_id,
       a.status, a.mode, a.end_time, EXTRACT(EPOCH FROM a.extend_window)::bigint,
       EXTRACT(EPOCH FROM a.extend_by)::bigint, a.bid_count, a.created_at, a.max_end_time, a.reserve_price,
       COALESCE(a.leader_max, 0), a.buy_now_price,
       COALESCE((SELECT x.alias FROM bidder_alias x WHERE x.auction_id = a.id AND x.bidder_id = a.leader_id), 0)
  FROM page p
  JOIN auction a ON a.id = p.id
 ORDER BY p.created_at DESC, p.id DESC
