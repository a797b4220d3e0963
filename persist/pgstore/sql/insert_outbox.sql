-- One outbox row per closed auction, in the closing transaction, and a
-- notification that wakes the topic's outbox relays when it commits (PostgreSQL
-- delivers NOTIFY only on commit, and folds repeats within a transaction).
WITH added AS (
    INSERT INTO outbox (topic, aggregate_id, payload)
    SELECT $1, e.id, e.payload::jsonb
      FROM unnest($2::bigint[], $3::text[]) AS e(id, payload)
    RETURNING id
)
SELECT c.n
  FROM (SELECT count(*) AS n FROM added) c, pg_notify('outbox:' || $1::text, '') AS notify
