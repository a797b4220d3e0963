UPDATE outbox SET published_at = clock_timestamp() WHERE id = ANY($1::bigint[])
