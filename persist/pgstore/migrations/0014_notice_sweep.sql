-- How far the notifier's sweep has checked the bid-notifications outbox:
-- every notice row with id at most swept_upto was found stored (or stored
-- by the sweep). A broker that loses what it acknowledged (the embedded one
-- keeps messages in memory) would otherwise lose the notices in flight.
-- It starts at the outbox's end: notices before the migration were
-- delivered by the versions that wrote them.
CREATE TABLE notice_sweep (
    one        BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    swept_upto BIGINT  NOT NULL
);
INSERT INTO notice_sweep (swept_upto) SELECT coalesce(max(id), 0) FROM outbox;
