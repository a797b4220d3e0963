-- Moves each auction's persisted_seq over the run of consecutive seqs that
-- follows it in bid, and nothing further: a gap stops it. (A seq present
-- twice also stops it, which can only under-count.) bid_count follows, so
-- the row never counts a bid PostgreSQL does not hold. The rows are locked
-- by lock_auctions.sql, so this statement sees every committed bid.
UPDATE auction a
   SET persisted_seq = a.persisted_seq + r.n,
       bid_count     = GREATEST(a.bid_count, a.persisted_seq + r.n)
  FROM (SELECT x.id, count(*) AS n
          FROM auction x
          CROSS JOIN LATERAL (
                SELECT b.seq - row_number() OVER (ORDER BY b.seq) AS base
                  FROM bid b
                 WHERE b.auction_id = x.id AND b.seq > x.persisted_seq) s
         WHERE x.id = ANY($1) AND s.base = x.persisted_seq
         GROUP BY x.id) r
 WHERE a.id = r.id
RETURNING a.id, a.persisted_seq
