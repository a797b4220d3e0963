-- The extension cap: anti-sniping never moves an auction's end past it
-- (it is after the end at creation; extensions may reach it). NULL: no cap.
ALTER TABLE auction ADD COLUMN max_end_time TIMESTAMPTZ;
ALTER TABLE auction ADD CONSTRAINT auction_end_within_cap CHECK (max_end_time IS NULL OR end_time <= max_end_time);
