-- Moves the PostgreSQL end of hot auctions that Redis extended (anti-sniping)
-- to Redis's end, so that they stop being due. Never earlier.
UPDATE auction a
   SET end_time = GREATEST(a.end_time, TIMESTAMPTZ 'epoch' + s.end_us * INTERVAL '1 microsecond')
  FROM unnest($1::bigint[], $2::bigint[]) AS s(id, end_us)
 WHERE a.id = s.id
   AND a.status = 'OPEN'
