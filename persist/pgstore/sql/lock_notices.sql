-- Serializes the notifiers' inserts until their transactions end, so that
-- notification.n rises in commit order: a reader that saw notice n has
-- seen every notice below it (GET /me/notifications?after=, read marks).
SELECT pg_advisory_xact_lock(7021989112626114927) -- "bidgate notices"
