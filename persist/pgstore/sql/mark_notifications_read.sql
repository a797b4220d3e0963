-- Marks user $1's notices read up to their notice $2: read_upto rises to
-- its n and never falls (an older id, or a race with a newer mark, leaves
-- the higher one). Answers the unread count past the new read_upto,
-- counted up to $3 at most; no row when $2 is not a notice of user $1's.
WITH target AS (
    SELECT n FROM notification WHERE user_id = $1 AND id = $2
),
marked AS (
    INSERT INTO notification_read AS r (user_id, read_upto)
    SELECT $1, n FROM target
        ON CONFLICT (user_id) DO UPDATE SET read_upto = GREATEST(r.read_upto, EXCLUDED.read_upto)
    RETURNING read_upto
)
SELECT (SELECT count(*)
          FROM (SELECT 1 FROM notification x WHERE x.user_id = $1 AND x.n > m.read_upto LIMIT $3) capped)
  FROM marked m
