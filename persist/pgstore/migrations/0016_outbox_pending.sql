-- The outbox's unpublished rows, one entry each: where the relays find
-- their work. The partial index idx_outbox_unpublished did that job, but
-- publishing a row left its entry behind, dead, until a vacuum of the
-- whole outbox removed it, and with published rows kept a week autovacuum
-- comes rarely. Every relay pass, backlog read and notice sweep stepped
-- over all of them: after 1,000,000 rows published, a pass that found ten
-- read 42,000 pages (0.36 s), and 38,000 after one three-node flash sale
-- made an empty one take 0.9 ms. An entry here is deleted when its row is
-- published, so the table is the size of the backlog, and autovacuum, whose
-- threshold scales with the table, keeps it small.
CREATE TABLE outbox_pending (
    topic TEXT   NOT NULL,
    id    BIGINT NOT NULL,
    PRIMARY KEY (topic, id)
);

-- Every row added unpublished is pending, whichever statement adds it:
-- this version's and, during a rolling upgrade, the previous version's,
-- which know nothing of this table. Per statement, so a close that tells
-- thousands of bidders adds their entries in one insert.
CREATE OR REPLACE FUNCTION outbox_add_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_pending (topic, id)
    SELECT topic, id FROM added WHERE published_at IS NULL;
    RETURN NULL;
END
$$;

-- The trigger first: creating it locks out writers until this commits, so
-- no row falls between it and the copy below.
CREATE TRIGGER outbox_add_pending AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_add_pending();

INSERT INTO outbox_pending (topic, id)
SELECT topic, id FROM outbox WHERE published_at IS NULL;

-- idx_outbox_unpublished stays while a previous version may run: its
-- relays read it, and without it each of their polls would read the whole
-- outbox, a week of rows. Nothing here reads it. A migration of a later
-- version, once no node of this one's predecessor is left, drops it.
