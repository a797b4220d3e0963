-- When the closer settled the auction (database clock).
ALTER TABLE auction ADD COLUMN closed_at TIMESTAMPTZ;
