-- A page of user $1's notices, newest first (by n): at most $4 of them,
-- only those stored after the user's notice $2 when $3 is true, only those
-- stored before it when $3 is false, all when $2 is ''; with the user's
-- unread count (notices past their read_upto), counted up to $5 at most.
--
-- One row per notice of the page, or one with NULL id when the page is
-- empty. anchored is false (and the page empty) when $2 is not a notice of
-- user $1's: another user's notice is the same as none.
WITH bounds AS (
    -- The page's open interval of n, (lo, hi); no row when the anchor is
    -- not the user's.
    SELECT CASE WHEN $3::boolean THEN a.n ELSE 0 END AS lo,
           CASE WHEN $3::boolean THEN 9223372036854775807 ELSE a.n END AS hi
      FROM notification a
     WHERE a.user_id = $1 AND a.id = $2::text AND $2::text <> ''
    UNION ALL
    SELECT 0, 9223372036854775807 WHERE $2::text = ''
),
unread AS (
    -- Capped: a user who never reads costs at most $5 index entries.
    SELECT count(*) AS unread
      FROM (SELECT 1
              FROM notification x
             WHERE x.user_id = $1
               AND x.n > COALESCE((SELECT r.read_upto FROM notification_read r WHERE r.user_id = $1), 0)
             LIMIT $5) capped
)
SELECT u.unread, b.lo IS NOT NULL AS anchored,
       p.id, p.type, p.auction_id, p.title, p.price, p.max_amount, p.at
  FROM unread u
  LEFT JOIN bounds b ON true
  -- Walks (user_id, n) backwards from the page's top and stops at its end
  -- (LATERAL with OFFSET 0: never a sort of every notice of the user).
  LEFT JOIN LATERAL (
        SELECT x.n, x.id, x.type, x.auction_id, x.title, x.price, x.max_amount, x.at
          FROM notification x
         WHERE x.user_id = $1 AND x.n > b.lo AND x.n < b.hi
         ORDER BY x.n DESC
         LIMIT $4 OFFSET 0) p ON true
 ORDER BY p.n DESC
