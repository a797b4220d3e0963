-- How far an auction's bids are in PostgreSQL without a gap: every seq from
-- 1 to persisted_seq has its row in bid. Hot bids arrive through Kafka in
-- any order and maybe not at all (a broker may lose what it acknowledged),
-- so the high-water mark of what arrived says nothing; this does.
ALTER TABLE auction ADD COLUMN persisted_seq BIGINT NOT NULL DEFAULT 0;

-- The run of seqs after persisted_seq is found by seq.
CREATE INDEX idx_bid_auction_seq ON bid (auction_id, seq);
