-- Closes that still owe their notices (won, lost, sold or unsold) to the
-- outbox: the closing transaction adds a row per closed auction, with the
-- winner of its event (0: nobody, below the reserve too), its final price
-- and its closing time; right after the commit the closer reads the
-- notices from it, stores them, and writes them to the outbox deleting the
-- row. A hot close tells thousands of bidders, and writing their outbox
-- rows in the closing transaction kept it open for a second. A row left by
-- a closer that died is taken up by the next pass after a grace.
CREATE TABLE close_notice (
    auction_id BIGINT PRIMARY KEY REFERENCES auction (id),
    winner     BIGINT NOT NULL,
    price      NUMERIC(14,2) NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
