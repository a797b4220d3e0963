-- A hidden reserve: an auction that ends below it has no winner. NULL: none.
ALTER TABLE auction ADD COLUMN reserve_price NUMERIC(14,2) CHECK (reserve_price >= start_price);
