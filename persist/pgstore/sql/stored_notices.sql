-- Which of the notice ids $1 are stored (the notifier skips those).
SELECT id FROM notification WHERE id = ANY($1::text[])
