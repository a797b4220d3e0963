-- How far each of the given auctions is persisted without a gap, read
-- again: a position only rises.
SELECT id, persisted_seq FROM auction WHERE id = ANY($1::bigint[])
