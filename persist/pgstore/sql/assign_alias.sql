-- After a cold bid, in its transaction: gives bidder $2 the next alias of
-- auction $1 if they have a row and no alias yet, and answers the leader's
-- alias (0: nobody leads). A statement of its own, after the bid's: its
-- snapshot is taken while the transaction holds the auction's row lock, so
-- every alias handed out before is seen and max + 1 is free.
WITH given AS (
    INSERT INTO bidder_alias (auction_id, bidder_id, alias)
    SELECT $1, $2, COALESCE((SELECT max(alias) FROM bidder_alias WHERE auction_id = $1), 0) + 1
     WHERE EXISTS (SELECT 1 FROM bid WHERE auction_id = $1 AND bidder_id = $2)
       AND NOT EXISTS (SELECT 1 FROM bidder_alias WHERE auction_id = $1 AND bidder_id = $2)
    RETURNING bidder_id, alias
)
SELECT COALESCE((SELECT alias FROM given WHERE bidder_id = a.leader_id),
                (SELECT x.alias FROM bidder_alias x WHERE x.auction_id = a.id AND x.bidder_id = a.leader_id),
                0)
  FROM auction a
 WHERE a.id = $1
