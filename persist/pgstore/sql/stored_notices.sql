-- Which of the notice ids $1 are stored (the notifier skips those). One
-- index probe per id, whatever the statistics: given a batch of ids and
-- a table without them (never analysed, or young), the planner prefers a
-- sequential scan of notification, which took seconds per batch under
-- load. OFFSET 0 keeps the subquery from being flattened into a join the
-- planner could turn into that scan.
SELECT n.id
  FROM unnest($1::text[]) AS x(id)
 CROSS JOIN LATERAL (SELECT id FROM notification WHERE id = x.id OFFSET 0) n
