-- The alias of auction $1's leader: their rank by first row among the
-- auction's bidders (0: nobody leads). The cold bid's batch runs it right
-- after its statement, in its transaction: a new snapshot, taken while the
-- transaction holds the auction's row lock, so every earlier row is seen.
SELECT count(*)
  FROM (SELECT min(b.seq) AS first_seq
          FROM bid b
         WHERE b.auction_id = $1
         GROUP BY b.bidder_id) f
 WHERE f.first_seq <= (SELECT min(b.seq)
                         FROM auction a JOIN bid b ON b.auction_id = a.id AND b.bidder_id = a.leader_id
                        WHERE a.id = $1)
