-- The auction's current state, denormalized so that a bid is checked against
-- one row rather than MAX(amount) over its bids.
CREATE TABLE auction (
    id            BIGSERIAL     PRIMARY KEY,
    seller_id     BIGINT        NOT NULL CHECK (seller_id > 0),
    title         VARCHAR(200)  NOT NULL,
    start_price   NUMERIC(14,2) NOT NULL CHECK (start_price >= 0),
    current_price NUMERIC(14,2) NOT NULL,
    min_increment NUMERIC(14,2) NOT NULL CHECK (min_increment > 0),
    leader_id     BIGINT,
    bid_count     BIGINT        NOT NULL DEFAULT 0,
    status        VARCHAR(10)   NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'CLOSED')),
    mode          VARCHAR(4)    NOT NULL DEFAULT 'COLD' CHECK (mode IN ('COLD', 'HOT')),
    end_time      TIMESTAMPTZ   NOT NULL,
    extend_window INTERVAL      NOT NULL DEFAULT INTERVAL '2 minutes',
    extend_by     INTERVAL      NOT NULL DEFAULT INTERVAL '2 minutes',
    last_bid_at   TIMESTAMPTZ,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT clock_timestamp()
);

-- The closer scans only open auctions, by end time.
CREATE INDEX idx_auction_open_end ON auction (end_time) WHERE status = 'OPEN';

-- Append-only log of accepted bids. UNIQUE (auction_id, request_id) is the
-- idempotency guarantee at the database level.
CREATE TABLE bid (
    id          BIGSERIAL     PRIMARY KEY,
    auction_id  BIGINT        NOT NULL REFERENCES auction (id),
    bidder_id   BIGINT        NOT NULL,
    amount      NUMERIC(14,2) NOT NULL CHECK (amount > 0),
    request_id  UUID          NOT NULL,
    seq         BIGINT        NOT NULL,
    accepted_at TIMESTAMPTZ   NOT NULL, -- clock of the store that serialized the bid
    end_time    TIMESTAMPTZ   NOT NULL, -- the auction's end right after this bid
    created_at  TIMESTAMPTZ   NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (auction_id, request_id)
);

CREATE INDEX idx_bid_auction_amount ON bid (auction_id, amount DESC);

-- Events written in the same transaction as the state change they announce,
-- relayed to Kafka afterwards.
CREATE TABLE outbox (
    id           BIGSERIAL   PRIMARY KEY,
    topic        TEXT        NOT NULL,
    aggregate_id BIGINT      NOT NULL,
    payload      JSONB       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    published_at TIMESTAMPTZ
);

CREATE INDEX idx_outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
