-- Notices to users (bidgate.Notice), as the notifier stores them from the
-- bid-notifications topic. n is the order they were stored in: a user's
-- list and unread count walk (user_id, n); id, derived from the cause, is
-- unique so that a notice delivered again is stored once.
CREATE TABLE notification (
    n          BIGSERIAL PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    user_id    BIGINT NOT NULL,
    type       TEXT NOT NULL CHECK (type IN ('outbid', 'won', 'lost', 'sold', 'unsold')),
    auction_id BIGINT NOT NULL,
    title      TEXT NOT NULL,
    price      NUMERIC(14,2) NOT NULL,
    max_amount NUMERIC(14,2),
    at         TIMESTAMPTZ NOT NULL,
    stored_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX idx_notification_user ON notification (user_id, n DESC);
-- The retention job deletes the oldest first, in batches.
CREATE INDEX idx_notification_stored ON notification (stored_at);

-- How far each user has read: every notice with n at most read_upto.
CREATE TABLE notification_read (
    user_id   BIGINT PRIMARY KEY,
    read_upto BIGINT NOT NULL
);
