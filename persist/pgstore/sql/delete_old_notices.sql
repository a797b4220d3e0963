-- Deletes up to $2 of the notices stored more than $1 seconds ago, oldest
-- first (idx_notification_stored), and answers how many.
WITH old AS (
    SELECT n
      FROM notification
     WHERE stored_at < clock_timestamp() - make_interval(secs => $1::double precision)
     ORDER BY stored_at
     LIMIT $2
)
DELETE FROM notification x USING old WHERE x.n = old.n
