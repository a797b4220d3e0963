package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Promote moves an open cold auction to the hot path while bids keep coming:
// under the auction's row lock it copies the state and the accepted bids'
// request ids into Redis, flips the mode to HOT and commits. A cold bid
// waiting on that lock then finds mode HOT, writes nothing, and is retried
// on the hot path. Promoting a hot auction is a no-op.
func (s *Service) Promote(ctx context.Context, id int64, trigger string) (bidgate.Auction, error) {
	promoted := false
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		store := pgstore.Store{DB: tx}
		a, err := store.LockAuction(ctx, id)
		if err != nil {
			return err
		}
		if a.Mode == bidgate.ModeHot {
			return nil
		}
		if a.Status != bidgate.StatusOpen {
			return bidgate.ErrAuctionClosed
		}
		bids, err := store.AcceptedBids(ctx, id)
		if err != nil {
			return err
		}
		a.Mode = bidgate.ModeHot
		if _, err := s.rs.Load(ctx, a, bids, true); err != nil {
			return err
		}
		promoted = true
		return store.SetHot(ctx, id)
	})
	if err != nil {
		return bidgate.Auction{}, classify(fmt.Errorf("promote auction %d: %w", id, err))
	}
	s.hotIDs.Store(id, struct{}{})
	if promoted {
		s.metrics.promotions.WithLabelValues(trigger).Inc()
		s.log.Info("auction promoted to hot", "auction", id, "trigger", trigger)
	}
	a, err := s.primaryAuction(ctx, id) // the replica may not have the promotion yet
	if err == nil && promoted {
		// The seq does not move: only the mode says the nodes' read
		// caches now hold a stale "hot": false.
		u := redisstore.UpdateOf(a, time.Time{})
		u.Mode = bidgate.ModeHot
		s.cold.pub.publishUpdate(ctx, u)
	}
	return a, err
}

// promoteSoon promotes in the background, once at a time per auction.
func (s *Service) promoteSoon(id int64) {
	if _, busy := s.promoting.LoadOrStore(id, struct{}{}); busy {
		return
	}
	go func() {
		defer s.promoting.Delete(id)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.Promote(ctx, id, "auto"); err != nil {
			s.log.Warn("automatic promotion failed", "auction", id, "err", err)
		}
	}()
}

// heatMeter counts a node's cold bids per auction in one-second windows and
// says when an auction crosses the promotion rate. Node time is fine here:
// it decides only where bids are serialized, never whether one is on time.
type heatMeter struct {
	limit int

	mu      sync.Mutex
	windows map[int64]heatWindow
}

type heatWindow struct {
	second int64
	count  int
}

func newHeatMeter(limit int) *heatMeter {
	return &heatMeter{limit: limit, windows: make(map[int64]heatWindow)}
}

// hit counts one bid and reports whether the auction is now over the limit.
func (h *heatMeter) hit(id int64) bool {
	if h.limit <= 0 {
		return false
	}
	now := time.Now().Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.windows[id]
	if w.second != now {
		if len(h.windows) > 100_000 {
			for k, v := range h.windows {
				if v.second < now-1 {
					delete(h.windows, k)
				}
			}
		}
		w = heatWindow{second: now}
	}
	w.count++
	h.windows[id] = w
	return w.count > h.limit
}
