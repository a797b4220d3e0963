-- GET /auctions and GET /me/auctions: full-text search on titles and one
-- index per keyset order, so a page is an index range read, never a sort of
-- every match nor an OFFSET.

-- The 'simple' configuration lower-cases and splits on non-letters, with no
-- stemming and no stop words: titles come in many languages (Vietnamese
-- first), where English stemming would mangle words and drop none usefully.
-- A title never changes, so the stored column costs nothing on a bid's UPDATE.
ALTER TABLE auction ADD COLUMN title_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', title)) STORED;
CREATE INDEX idx_auction_title_tsv ON auction USING gin (title_tsv);
-- Most searches are of open auctions, a tenth of the rows or less: their
-- own index keeps a common word's bitmap (and the rows it fetches) small.
CREATE INDEX idx_auction_title_tsv_open ON auction USING gin (title_tsv) WHERE status = 'OPEN';

-- sort=ending, sort=newest, sort=price_desc within one status; each ends
-- with id, the tie-breaker the cursor carries.
CREATE INDEX idx_auction_list_ending ON auction (status, end_time, id);
CREATE INDEX idx_auction_list_newest ON auction (status, created_at DESC, id DESC);
CREATE INDEX idx_auction_list_price ON auction (status, current_price DESC, id DESC);

-- A seller's auctions (GET /me/auctions, sellerId=), newest first; the
-- other orders of one seller's auctions sort that seller's rows only.
CREATE INDEX idx_auction_seller_newest ON auction (seller_id, created_at DESC, id DESC);
