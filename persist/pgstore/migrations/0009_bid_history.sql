-- An auction's history reads each bidder's first row (their alias is their
-- rank by it) from this index alone.
CREATE INDEX idx_bid_auction_bidder_seq ON bid (auction_id, bidder_id, seq);
-- A user's bids, one group per auction, newest auction first, without
-- visiting the table.
CREATE INDEX idx_bid_bidder_auction ON bid (bidder_id, auction_id) INCLUDE (amount, max_amount);
