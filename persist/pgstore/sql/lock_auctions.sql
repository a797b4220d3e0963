-- Locks the auctions a batch of hot bids belongs to, in id order so that
-- writers of overlapping batches (persisters, reconcilers, the closer) never
-- deadlock, and so that each one's persisted_seq is advanced by one writer
-- at a time from what the others committed. Unknown auctions are absent.
SELECT id, persisted_seq
  FROM auction
 WHERE id = ANY($1)
 ORDER BY id
   FOR UPDATE
