-- The relay lists the hot auctions whose Redis logs may still hold bids to
-- relay: the open ones, and those closed recently.
CREATE INDEX idx_auction_hot_open ON auction (id) WHERE mode = 'HOT' AND status = 'OPEN';
CREATE INDEX idx_auction_hot_closed ON auction (closed_at) WHERE mode = 'HOT' AND status = 'CLOSED';
