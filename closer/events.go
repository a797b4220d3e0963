package closer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist/kafka"
)

// closedAuction is an auction as its closing statement returned it: the
// settled row, the single source of the event and of the final state update.
type closedAuction struct {
	id       int64
	leader   *int64 // nil when nobody bid
	price    decimal.Decimal
	bidCount int64
	endTime  time.Time
	closedAt time.Time
}

// collectClosed reads rows of id, leader_id, current_price, bid_count,
// end_time, closed_at.
func collectClosed(rows pgx.Rows) ([]closedAuction, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (closedAuction, error) {
		var a closedAuction
		err := row.Scan(&a.id, &a.leader, &a.price, &a.bidCount, &a.endTime, &a.closedAt)
		return a, err
	})
}

// event is the auction-closed payload. The winner and price come from the
// row the same transaction settled, so every copy the relay sends (it
// delivers at least once) names the same winner.
func (a closedAuction) event() bidgate.AuctionClosed {
	return bidgate.AuctionClosed{AuctionID: a.id, WinnerID: a.leader, FinalPrice: bidgate.FormatMoney(a.price),
		ClosedAt: a.closedAt.UTC(), BidCount: a.bidCount}
}

// addEvents writes one outbox row per closed auction and notifies the
// relays, inside the closing transaction tx: the event exists if and only if
// the close committed.
func addEvents(ctx context.Context, tx pgx.Tx, closed []closedAuction) error {
	if len(closed) == 0 {
		return nil
	}
	ids := make([]int64, len(closed))
	payloads := make([]string, len(closed))
	for i, a := range closed {
		b, err := json.Marshal(a.event())
		if err != nil {
			return fmt.Errorf("encode auction-closed event of auction %d: %w", a.id, err)
		}
		ids[i], payloads[i] = a.id, string(b)
	}
	var n int64
	if err := tx.QueryRow(ctx, insertOutboxSQL, kafka.TopicAuctionClosed, ids, payloads).Scan(&n); err != nil {
		return fmt.Errorf("write %d outbox rows: %w", len(closed), err)
	}
	if n != int64(len(closed)) {
		return fmt.Errorf("write %d outbox rows: %d written", len(closed), n)
	}
	return nil
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to. It runs after the commit and is
// best effort: the outbox event, not this message, is the durable record.
func (c *Closer) announce(ctx context.Context, closed []closedAuction) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	pipe := c.rdb.Pipeline()
	for _, a := range closed {
		auction := bidgate.Auction{ID: a.id, CurrentPrice: a.price, EndTime: a.endTime,
			Status: bidgate.StatusClosed, BidCount: a.bidCount}
		if a.leader != nil {
			auction.LeaderID = *a.leader
		}
		u := bidgate.NewStateUpdate(auction)
		u.UpdatedAt = a.closedAt.UTC().Format(time.RFC3339Nano)
		b, err := json.Marshal(u)
		if err != nil {
			c.cfg.Log.Warn("encode closed state", "auction", a.id, "err", err)
			continue
		}
		pipe.Publish(ctx, bidgate.UpdatesChannel(a.id), b)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.metrics.errors.WithLabelValues("announce").Inc()
		c.cfg.Log.Warn("publish closed states", "auctions", len(closed), "err", err)
	}
}
