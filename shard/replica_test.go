package shard

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/persist/pgstore"
)

// With a read replica whose replay is paused (yet within its lag bound),
// Auction answers a cold auction's row from it, as of the pause, but never
// hides this node's own writes: an auction created since is re-read from
// the primary, one promoted since is read live, a cancel answers the
// cancelled auction, and Current, or Read asking for a seq the replica has
// not reached, reads the primary.
func TestAuctionThroughAReadReplica(t *testing.T) {
	pair := testdb.NewPair(t)
	primary, err := pgstore.Open(ctx, pgstore.Config{URL: pair.PrimaryURL, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Close)
	standby, err := pgstore.Open(ctx, pgstore.Config{URL: pair.StandbyURL, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Close)
	reg := prometheus.NewRegistry()
	reads, err := pgstore.OpenReads(ctx, primary, pgstore.ReadConfig{URL: pair.StandbyURL, MaxLag: time.Hour,
		CheckInterval: 20 * time.Millisecond, CheckTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- reads.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		reads.Close()
	})
	s := newService(t, primary, Config{Reads: reads})

	bidOn := newAuction(t, s, "100", "1", time.Hour, 0, time.Second)
	promoted := newAuction(t, s, "100", "1", time.Hour, 0, time.Second)
	cancelled := newAuction(t, s, "100", "1", time.Hour, 0, time.Second)
	await.NoError(t, 30*time.Second, "the standby to replay the auctions", func() error {
		_, err := (&pgstore.Store{DB: standby}).Auction(ctx, cancelled.ID) // the last written
		return err
	})
	await.Until(t, 30*time.Second, "the standby to serve", nil, func() (pgstore.Querier, bool) {
		q := reads.Querier()
		return q, q != pgstore.Querier(primary)
	})
	if _, err := standby.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := standby.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
			t.Errorf("resume replay: %v", err)
		}
	})

	if _, err := s.PlaceBid(ctx, bid(bidOn.ID, 1, "150")); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Promote(ctx, promoted.ID, "operator"); err != nil || a.Mode != bidgate.ModeHot {
		t.Fatalf("promote: %+v, %v", a, err)
	}
	if _, err := s.PlaceBid(ctx, bid(promoted.ID, 1, "200")); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Cancel(ctx, cancelled.ID, cancelled.SellerID); err != nil || a.Status != bidgate.StatusCancelled {
		t.Fatalf("cancel answered %+v, %v; want the cancelled auction", a, err)
	}
	created := newAuction(t, s, "100", "1", time.Hour, 0, time.Second)

	tests := []struct {
		name      string
		id        int64
		wantPrice string
		wantMode  bidgate.Mode
		source    string // that answered the row; "" for either
	}{
		{"bid on since: the replica's row, as of the pause", bidOn.ID, "100", bidgate.ModeCold, pgstore.SourceReplica},
		{"created since: re-read from the primary", created.ID, "100", bidgate.ModeCold, pgstore.SourcePrimary},
		{"promoted by this node since: live", promoted.ID, "200", bidgate.ModeHot, ""},
	}
	if a, err := s.Current().Auction(ctx, bidOn.ID); err != nil || a.CurrentPrice.String() != "150" {
		t.Errorf("Current: %+v, %v; want the primary's price 150", a, err)
	}
	// A bidder naming its bid's seq reads past the paused replica.
	if a, err := s.Read(ctx, bidOn.ID, 1); err != nil || a.CurrentPrice.String() != "150" || a.BidCount != 1 {
		t.Errorf("Read with minSeq 1: %+v, %v; want the primary's price 150 at seq 1", a, err)
	}
	if a, err := s.Read(ctx, bidOn.ID, 0); err != nil || a.CurrentPrice.String() != "100" {
		t.Errorf("Read with minSeq 0: %+v, %v; want the replica's price 100", a, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testmetrics.Value(t, reg, "bidgate_reads_total", "source", tt.source)
			a, err := s.Auction(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if a.CurrentPrice.String() != tt.wantPrice || a.Mode != tt.wantMode {
				t.Errorf("price %s mode %s, want %s %s", a.CurrentPrice, a.Mode, tt.wantPrice, tt.wantMode)
			}
			if tt.source == "" {
				return
			}
			if n := testmetrics.Value(t, reg, "bidgate_reads_total", "source", tt.source); n != before+1 {
				t.Errorf("%s reads %v, want %v", tt.source, n, before+1)
			}
		})
	}
}
