-- Writes a batch of hot bids and raises each auction row to the highest bid
-- it newly holds, in one statement; returns how many bids were new.
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
                  $7::timestamptz[], $8::text[], $9::numeric[], $10::bigint[], $11::numeric[])
           AS u(auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time, kind, max_amount, outbid, outbid_max)
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
-- A new row that took the lead tells the leader it replaced (outbid > 0,
-- from the Redis log): an outbid notice through the outbox, in this
-- transaction, once (a row written before is not new), at the row's amount
-- (a leading row stands at the new price), unless the notice is stored.
noticed AS (
    INSERT INTO outbox (topic, aggregate_id, payload)
    SELECT 'bid-notifications', u.outbid, jsonb_build_object(
               'id', 'outbid-' || n.auction_id || '-' || n.seq, 'type', 'outbid', 'userId', u.outbid,
               'auctionId', n.auction_id, 'title', a.title, 'price', n.amount::numeric(14,2)::text,
               'maxAmount', u.outbid_max::numeric(14,2)::text,
               'at', to_char(u.accepted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
      FROM new n
      JOIN u ON u.auction_id = n.auction_id AND u.seq = n.seq
      JOIN auction a ON a.id = n.auction_id
     WHERE u.outbid > 0
       -- Stored already (the relay's own notice came first, as it mostly
       -- does): the notifier would drop this copy as known. OFFSET 0 keeps
       -- it one probe of the id index per row, statistics or none.
       AND NOT EXISTS (SELECT 1 FROM notification nt WHERE nt.id = 'outbid-' || n.auction_id || '-' || n.seq OFFSET 0)
    RETURNING id
),
woken AS (
    SELECT count(*) AS n FROM (SELECT 1 FROM noticed LIMIT 1) x CROSS JOIN LATERAL pg_notify('outbox:bid-notifications', '')
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
SELECT (SELECT count(*) FROM new), (SELECT count(*) FROM raised), (SELECT n FROM woken)
