-- Closes whose notices were not written to the outbox $1 seconds after
-- they committed (the closer that closed them died first), up to $2.
SELECT auction_id
  FROM close_notice
 WHERE created_at < clock_timestamp() - make_interval(secs => $1::double precision)
 ORDER BY auction_id
 LIMIT $2
