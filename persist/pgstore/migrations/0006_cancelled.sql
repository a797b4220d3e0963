-- A seller may cancel an auction before its first bid.
ALTER TABLE auction DROP CONSTRAINT auction_status_check;
ALTER TABLE auction ADD CONSTRAINT auction_status_check CHECK (status IN ('OPEN', 'CLOSED', 'CANCELLED'));
