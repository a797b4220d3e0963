-- Bidder aliases, stored: "Bidder <alias>" numbers an auction's bidders by
-- their first accepted row, and never changes. Assigned when the row
-- becomes part of the auction's gap-free prefix: a cold bid in its own
-- transaction (assign_alias.sql), hot rows when the persister advances
-- persisted_seq over them (assign_aliases.sql); both hold the auction's row
-- lock, so aliases are handed out one writer at a time. Reads (the
-- history, the leader of any view, the lists) are then one key probe each
-- instead of ranking every row of the auction.
CREATE TABLE bidder_alias (
    auction_id bigint NOT NULL,
    bidder_id  bigint NOT NULL,
    alias      integer NOT NULL CHECK (alias > 0),
    PRIMARY KEY (auction_id, bidder_id),
    UNIQUE (auction_id, alias)
);

-- The rows already written: each bidder's rank by first row within the
-- prefix (a hot auction's rows past persisted_seq get theirs when the
-- prefix reaches them).
INSERT INTO bidder_alias (auction_id, bidder_id, alias)
SELECT f.auction_id, f.bidder_id, row_number() OVER (PARTITION BY f.auction_id ORDER BY f.first_seq)
  FROM (SELECT b.auction_id, b.bidder_id, min(b.seq) AS first_seq
          FROM bid b
          JOIN auction a ON a.id = b.auction_id
         WHERE b.seq <= CASE a.mode WHEN 'COLD' THEN a.bid_count ELSE a.persisted_seq END
         GROUP BY b.auction_id, b.bidder_id) f;
