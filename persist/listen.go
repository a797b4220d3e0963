package persist

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/internal/retry"
	"bidgate/persist/pgstore"
)

// listener holds one pool connection that LISTENs on a topic's outbox
// channel, so that a relay wakes as soon as an event commits instead of at
// its next poll. Notifications that arrive while the relay is busy wait in
// the connection and end the next wait at once, so none is missed. When
// the connection breaks the relay falls back to polling and listens again
// on its next wait.
//
// Only one relay of a topic in the cluster listens: the one whose
// connection holds the topic's lead (pgstore.LeadOutbox). The others poll
// every standby, trying for the lead each time, so a leader that stops
// (its session ends with it) is followed within standby, and rows a stuck
// leader leaves are still published.
type listener struct {
	db      *pgxpool.Pool
	topic   string
	standby time.Duration
	leading prometheus.Gauge // 1 while conn leads; nil: not measured
	log     *slog.Logger
	conn    *pgxpool.Conn
	// following: the last try found another relay leading.
	following bool
}

// listen makes sure the connection leads and listens; on failure it logs
// and leaves l polling.
func (l *listener) listen(ctx context.Context) {
	if l.conn != nil {
		return
	}
	conn, err := l.db.Acquire(ctx)
	if err != nil {
		l.cannotListen(ctx, err)
		return
	}
	leads, err := pgstore.LeadOutbox(ctx, conn.Conn(), l.topic)
	if err != nil || !leads {
		if err != nil {
			l.cannotListen(ctx, err)
		}
		l.following = err == nil
		conn.Release() // it holds no lock
		return
	}
	l.following = false
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{pgstore.OutboxChannel(l.topic)}.Sanitize()); err != nil {
		l.cannotListen(ctx, err)
		l.discard(conn)
		return
	}
	l.setConn(conn)
}

// cannotListen logs why l polls, unless ctx ended.
func (l *listener) cannotListen(ctx context.Context, err error) {
	if ctx.Err() == nil {
		l.log.Warn("outbox relay cannot listen; polling", "topic", l.topic, "err", err)
	}
}

// setConn makes conn (nil: none) the connection that leads and listens.
func (l *listener) setConn(conn *pgxpool.Conn) {
	l.conn = conn
	switch {
	case l.leading == nil:
	case conn != nil:
		l.leading.Set(1)
	default:
		l.leading.Set(0)
	}
}

// wait returns on a notification, after d (standby when another relay
// leads), or when ctx is done; it reports whether a notification came.
func (l *listener) wait(ctx context.Context, d time.Duration) bool {
	l.listen(ctx)
	if l.conn == nil {
		if l.following && l.standby > 0 {
			d = l.standby
		}
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
	l.log.Warn("outbox relay lost its LISTEN connection", "topic", l.topic, "err", err)
	l.discard(l.conn) // and with it the lead, should it be alive still
	l.setConn(nil)
	retry.Sleep(ctx, d)
	return false
}

// gather lets more notifications come for d after one did, then takes all
// that came: one pass answers them. Each commit that adds outbox rows
// notifies the leader, and a pass per notification cost more than the
// rows did.
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

// close stops listening, gives up the lead and gives the connection back
// to the pool, or closes it if it cannot be cleaned up.
func (l *listener) close() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := l.conn.Exec(ctx, "UNLISTEN *")
	if err == nil {
		err = pgstore.UnlockOutbox(ctx, l.conn.Conn(), l.topic)
	}
	if err != nil {
		l.discard(l.conn)
	} else {
		l.conn.Release()
	}
	l.setConn(nil)
}

// discard closes conn, which ends its session's lead, and gives it back to
// the pool, which drops a closed connection.
func (l *listener) discard(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Conn().Close(ctx)
	conn.Release()
}
