-- Proxy bids: the leader's hidden maximum (a straight bid's maximum is its
-- amount). NULL while nobody leads. Hidden like the reserve.
-- A hot auction's row holds it as of its promotion or close; Redis has the
-- live one.
ALTER TABLE auction ADD COLUMN leader_max NUMERIC(14,2);
UPDATE auction SET leader_max = current_price WHERE leader_id IS NOT NULL;
-- Buy-now: allowed while no bid has been accepted. NULL: none.
ALTER TABLE auction ADD COLUMN buy_now_price NUMERIC(14,2)
    CHECK (buy_now_price >= start_price + min_increment AND buy_now_price >= COALESCE(reserve_price, 0));

-- What each accepted row is: the bidder's own straight or proxy bid, the
-- automatic bid a leader's proxy made in answer to it, or a buy-now. A
-- proxy row's amount is what the bid stood at; max_amount is the hidden
-- maximum it carried (persisted, never shown but to its bidder).
ALTER TABLE bid ADD COLUMN kind VARCHAR(9) NOT NULL DEFAULT 'straight'
    CHECK (kind IN ('straight', 'proxy', 'automatic', 'buy_now'));
ALTER TABLE bid ADD COLUMN max_amount NUMERIC(14,2)
    CHECK ((kind = 'proxy') = (max_amount IS NOT NULL) AND (max_amount IS NULL OR max_amount >= amount));
