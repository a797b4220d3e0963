package persist

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate/internal/retry"
)

// listener holds one pool connection that LISTENs on a channel, so that a
// relay wakes as soon as an event commits instead of at its next poll.
// Notifications that arrive while the relay is busy wait in the connection
// and end the next wait at once, so none is missed. When the connection
// breaks the relay falls back to polling and listens again on its next wait.
type listener struct {
	db      *pgxpool.Pool
	channel string
	log     *slog.Logger
	conn    *pgxpool.Conn
}

// listen makes sure the connection is listening; on failure it logs and
// leaves l polling.
func (l *listener) listen(ctx context.Context) {
	if l.conn != nil {
		return
	}
	conn, err := l.db.Acquire(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("outbox relay cannot listen; polling", "err", err)
		}
		return
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("outbox relay cannot listen; polling", "err", err)
		}
		conn.Release()
		return
	}
	l.conn = conn
}

// wait returns on a notification, after d, or when ctx is done; it reports
// whether a notification came.
func (l *listener) wait(ctx context.Context, d time.Duration) bool {
	l.listen(ctx)
	if l.conn == nil {
		retry.Sleep(ctx, d)
		return false
	}
	waitCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := l.conn.Conn().WaitForNotification(waitCtx)
	if err == nil {
		return true
	}
	if ctx.Err() != nil || pgconn.Timeout(err) {
		return false // a timeout leaves the connection usable
	}
	l.log.Warn("outbox relay lost its LISTEN connection", "err", err)
	l.conn.Release() // the pool discards a broken connection
	l.conn = nil
	retry.Sleep(ctx, d)
	return false
}

// gather lets more notifications come for d after one did, then takes all
// that came: one pass answers them. Each commit that adds outbox rows
// notifies every relay on every node, and a pass per notification cost
// more than the rows did.
func (l *listener) gather(ctx context.Context, d time.Duration) {
	retry.Sleep(ctx, d)
	for l.conn != nil && ctx.Err() == nil {
		// A notification already received returns at once; the first
		// wait that times out says there are no more.
		if !l.wait(ctx, time.Millisecond) {
			return
		}
	}
}

// close stops listening and gives the connection back to the pool, or
// closes it if it cannot be cleaned up.
func (l *listener) close() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, "UNLISTEN *"); err != nil {
		_ = l.conn.Conn().Close(ctx)
	}
	l.conn.Release()
	l.conn = nil
}
