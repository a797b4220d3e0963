-- Writes a batch of hot bids and raises each auction row to the highest bid
-- it newly holds, in one statement; returns the new rows' auction and seq
-- (their outbid notices are insert_outbid_notices.sql's, in the same
-- transaction: joining them to the batch here was a nested loop over both,
-- quadratic in the batch).
--
-- Only bids a hot auction could have accepted are written: the auction is
-- HOT and OPEN (the closer writes the last bids before it settles), the
-- bidder is not its seller, and the bid was not accepted in the future.
-- Anything else cannot come from bidgate and is dropped unwritten. The row's
-- end is never moved here: Redis decides a hot auction's end, and the closer
-- moves the row's to Redis's (extend_hot.sql, settle_hot.sql), so no message
-- can push an end beyond the auction's rules.
--
-- Duplicates (redelivery, a relay that produced twice, a repair racing the
-- persister) meet the unique key and are skipped: at-least-once in,
-- exactly-once effect. A bid is never written over another: one whose seq
-- a row of its auction already holds is skipped too, whatever it says (the
-- writers check bids against the Redis log first; see persist.Persister). Raising from new rows only is enough: a duplicate's
-- raise was committed with its first write. The row is never lowered, so
-- batches may arrive in any order. bid_count is left to advance_persisted.sql.
WITH u AS (
    SELECT *
      FROM unnest($1::bigint[], $2::bigint[], $3::numeric[], $4::uuid[], $5::bigint[], $6::timestamptz[],
                  $7::timestamptz[], $8::text[], $9::numeric[])
           AS u(auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time, kind, max_amount)
),
new AS (
    INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time, kind, max_amount)
    SELECT u.auction_id, u.bidder_id, u.amount, u.request_id, u.seq, u.accepted_at, u.end_time, u.kind, u.max_amount
      FROM u
      JOIN auction a ON a.id = u.auction_id
     WHERE a.mode = 'HOT'
       AND a.status = 'OPEN'
       AND u.bidder_id <> a.seller_id
       AND u.accepted_at <= clock_timestamp() + INTERVAL '1 minute'
       AND NOT EXISTS (SELECT 1 FROM bid b WHERE b.auction_id = u.auction_id AND b.seq = u.seq)
    ON CONFLICT (auction_id, request_id) DO NOTHING
    RETURNING auction_id, bidder_id, amount, seq
),
top AS (
    SELECT DISTINCT ON (auction_id) auction_id, bidder_id, amount
      FROM new
     ORDER BY auction_id, seq DESC
),
raised AS (
    UPDATE auction a
       SET current_price = top.amount,
           leader_id     = top.bidder_id
      FROM top
     WHERE a.id = top.auction_id
       AND a.current_price < top.amount
    RETURNING a.id
)
SELECT n.auction_id, n.seq FROM new n
