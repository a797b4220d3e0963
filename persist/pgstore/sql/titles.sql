-- The titles of auctions $1 (a title never changes: callers cache it).
SELECT id, title FROM auction WHERE id = ANY($1)
