-- Flips an auction to the hot path. Its cold bids are all in PostgreSQL
-- already, so its persisted position starts at their count.
UPDATE auction SET mode = 'HOT', persisted_seq = bid_count WHERE id = $1
