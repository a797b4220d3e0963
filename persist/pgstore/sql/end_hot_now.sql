-- A hot auction Redis closed by a buy-now ends at that instant: the row's
-- end moves back to it (never forward), and the closer settles it as due.
UPDATE auction
   SET end_time = $2
 WHERE id = $1
   AND mode = 'HOT'
   AND status = 'OPEN'
   AND end_time > $2
