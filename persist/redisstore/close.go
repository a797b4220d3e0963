package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/close_auction.lua
	closeAuctionLua    string
	closeAuctionScript = redis.NewScript(closeAuctionLua)
	//go:embed lua/cancel_auction.lua
	cancelAuctionLua    string
	cancelAuctionScript = redis.NewScript(cancelAuctionLua)
)

// Ending says what Close found.
type Ending int

const (
	NoState   Ending = iota // Redis has no state for the auction
	Closed                  // closed, now or earlier: the final state follows
	Running                 // not ended by Redis's clock: EndUs is the (extended) end
	Cancelled               // cancelled by its seller (the row may not know yet)
)

// CloseOutcome is Close's answer.
type CloseOutcome struct {
	Ending     Ending
	PriceCents int64
	LeaderID   int64 // 0: nobody bid
	Seq        int64 // accepted bids
	EndUs      int64
}

// Close ends a hot auction in Redis if Redis's clock says its end has
// passed. It is idempotent: once closed it only reads, so a closer that
// crashed before settling PostgreSQL gets the same final state again.
func (s *Store) Close(ctx context.Context, id int64) (CloseOutcome, error) {
	v, err := closeAuctionScript.Run(ctx, s.rdb, []string{KeysOf(id).State}).Slice()
	if err != nil {
		return CloseOutcome{}, unavailable(fmt.Errorf("close auction %d in Redis: %w", id, err))
	}
	o, err := parseClose(v)
	if err != nil {
		return CloseOutcome{}, fmt.Errorf("close auction %d in Redis: %w", id, err)
	}
	return o, nil
}

// parseClose reads {0}, {3}, {2, end_us} or {1, price, leader, seq, end_us}.
func parseClose(v []any) (CloseOutcome, error) {
	if len(v) == 0 {
		return CloseOutcome{}, fmt.Errorf("empty script result")
	}
	kind, err := intReply(v[0])
	if err != nil {
		return CloseOutcome{}, err
	}
	var o CloseOutcome
	switch {
	case kind == 0 && len(v) == 1:
		o.Ending = NoState
	case kind == 3 && len(v) == 1:
		o.Ending = Cancelled
	case kind == 2 && len(v) == 2:
		o.Ending = Running
		o.EndUs, err = intReply(v[1])
	case kind == 1 && len(v) == 5:
		o.Ending = Closed
		if o.PriceCents, err = intReply(v[1]); err != nil {
			return o, err
		}
		if o.LeaderID, err = idReply(v[2]); err != nil {
			return o, fmt.Errorf("leader: %w", err)
		}
		if o.Seq, err = intReply(v[3]); err != nil {
			return o, err
		}
		o.EndUs, err = intReply(v[4])
	default:
		return o, fmt.Errorf("bad script result %v", v)
	}
	return o, err
}

// Cancel outcomes.
var (
	ErrCancelClosed  = errors.New("auction closed or ended")
	ErrCancelHasBids = errors.New("auction has bids")
)

// Cancel cancels a hot auction by Redis's clock and state: only while it is
// open, before its end and before its first bid. It returns the auction's
// end, or ErrNoState, ErrCancelClosed or ErrCancelHasBids. Cancelling a
// cancelled auction succeeds again.
func (s *Store) Cancel(ctx context.Context, id int64) (endUs int64, err error) {
	v, err := cancelAuctionScript.Run(ctx, s.rdb, []string{KeysOf(id).State}).Slice()
	if err != nil {
		return 0, unavailable(fmt.Errorf("cancel auction %d in Redis: %w", id, err))
	}
	kind, err := intReply(v[0])
	if err != nil {
		return 0, fmt.Errorf("cancel auction %d in Redis: %w", id, err)
	}
	switch {
	case kind == 0:
		return 0, ErrNoState
	case kind == 1 && len(v) == 2:
		return intReply(v[1])
	case kind == 2:
		return 0, ErrCancelClosed
	case kind == 3:
		return 0, ErrCancelHasBids
	}
	return 0, fmt.Errorf("cancel auction %d in Redis: bad script result %v", id, v)
}
