package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/persist/pgstore"
)

// Reads against a real primary and streaming standby of the test's own:
// the standby serves while caught up, and every way it falls short (lag,
// a missing row, a stop) sends the read to the primary without failing it.
// The subtests share the pair and run in order: some pause the standby's
// replay or stop it.
func TestReadReplica(t *testing.T) {
	pair := testdb.NewPair(t)
	ctx := context.Background()
	primary, err := pgstore.Open(ctx, pgstore.Config{URL: pair.PrimaryURL, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Close)
	standby, err := pgstore.Open(ctx, pgstore.Config{URL: pair.StandbyURL, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Close)
	rp := replicaPair{pair: pair, primary: primary, standby: standby}

	t.Run("a caught-up standby serves the reads", rp.servesWhenCaughtUp)
	t.Run("past MaxLag the primary serves", rp.lagGoesToPrimary)
	t.Run("a row the standby lacks is read from the primary", rp.notFoundRereadsPrimary)
	t.Run("a stopped standby costs no read", rp.stoppedStandby)
}

type replicaPair struct {
	pair    *testdb.Pair
	primary *pgxpool.Pool
	standby *pgxpool.Pool // for pausing replay
}

// reads opens a Reads on the pair with cfg (URL filled in), measuring
// every 20 ms until the test ends.
func (rp replicaPair) reads(t *testing.T, cfg pgstore.ReadConfig) (*pgstore.Reads, *prometheus.Registry) {
	t.Helper()
	cfg.URL = rp.pair.StandbyURL
	cfg.CheckInterval = 20 * time.Millisecond
	cfg.CheckTimeout = 2 * time.Second // a loaded machine must not read as a down standby
	cfg.ReadTimeout = 2 * time.Second
	reg := prometheus.NewRegistry()
	r, err := pgstore.OpenReads(context.Background(), rp.primary, cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		r.Close()
	})
	return r, reg
}

func (rp replicaPair) create(t *testing.T) bidgate.Auction {
	t.Helper()
	s := pgstore.Store{DB: rp.primary}
	a, err := s.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 7, Title: "replicated",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour),
		ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pauseReplay stops the standby applying WAL (it keeps receiving it) until
// the returned function or the test's end resumes it.
func (rp replicaPair) pauseReplay(t *testing.T) (resume func()) {
	t.Helper()
	if _, err := rp.standby.Exec(context.Background(), `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatalf("pause replay: %v", err)
	}
	resumed := false
	resume = func() {
		t.Helper()
		if resumed {
			return
		}
		resumed = true
		if _, err := rp.standby.Exec(context.Background(), `SELECT pg_wal_replay_resume()`); err != nil {
			t.Errorf("resume replay: %v", err)
		}
	}
	t.Cleanup(resume)
	return resume
}

// awaitReplicaRead reads id until the standby answers it with the mode
// want, and returns the auction.
func awaitReplicaRead(t *testing.T, r *pgstore.Reads, reg *prometheus.Registry, id int64, want bidgate.Mode) bidgate.Auction {
	t.Helper()
	return await.Until(t, 30*time.Second, "the standby to answer the read", nil, func() (bidgate.Auction, bool) {
		before := testmetrics.Value(t, reg, "bidgate_reads_total", "source", pgstore.SourceReplica)
		a, err := r.Auction(context.Background(), id)
		if err != nil {
			t.Fatalf("read auction %d: %v", id, err)
		}
		fromReplica := testmetrics.Value(t, reg, "bidgate_reads_total", "source", pgstore.SourceReplica) > before
		return a, fromReplica && a.Mode == want
	})
}

// While replay is paused the standby still answers the old row: what the
// reads return is the standby's, not the primary's. Resumed, they catch up.
func (rp replicaPair) servesWhenCaughtUp(t *testing.T) {
	r, reg := rp.reads(t, pgstore.ReadConfig{MaxLag: time.Hour})
	a := rp.create(t)
	awaitReplicaRead(t, r, reg, a.ID, bidgate.ModeCold) // not_found fallbacks until the row is replayed
	reasons := []string{pgstore.FallbackLag, pgstore.FallbackDown, pgstore.FallbackError, pgstore.FallbackNotFound}
	fallbacks := map[string]float64{}
	for _, reason := range reasons {
		fallbacks[reason] = testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", reason)
	}

	resume := rp.pauseReplay(t)
	if err := (&pgstore.Store{DB: rp.primary}).SetHot(context.Background(), a.ID); err != nil {
		t.Fatal(err)
	}
	got, err := r.Auction(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != bidgate.ModeCold {
		t.Fatalf("mode %s: the read was not the paused standby's", got.Mode)
	}
	if q := r.Querier(); q == pgstore.Querier(rp.primary) {
		t.Error("Querier is the primary while the standby serves")
	}
	resume()
	awaitReplicaRead(t, r, reg, a.ID, bidgate.ModeHot)
	for _, reason := range reasons {
		if n := testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", reason); n != fallbacks[reason] {
			t.Errorf("%v fallbacks for %s once the row was there, want none", n-fallbacks[reason], reason)
		}
	}
}

// Real lag (replay paused, the primary written) past MaxLag sends reads to
// the primary, counted; resumed, they return to the standby.
func (rp replicaPair) lagGoesToPrimary(t *testing.T) {
	const maxLag = 200 * time.Millisecond
	r, reg := rp.reads(t, pgstore.ReadConfig{MaxLag: maxLag})
	a := rp.create(t)
	awaitReplicaRead(t, r, reg, a.ID, bidgate.ModeCold)

	resume := rp.pauseReplay(t)
	b := rp.create(t) // moves the primary's WAL past the standby
	await.Until(t, 30*time.Second, "the lag to pass MaxLag", nil, func() (float64, bool) {
		lag := testmetrics.Value(t, reg, "bidgate_read_replica_lag_seconds")
		return lag, lag > 2*maxLag.Seconds()
	})
	primaryReads := testmetrics.Value(t, reg, "bidgate_reads_total", "source", pgstore.SourcePrimary)
	lagFallbacks := testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackLag)
	got, err := r.Auction(context.Background(), b.ID)
	if err != nil || got.ID != b.ID {
		t.Fatalf("read of a row the lagging standby lacks: %+v, %v", got, err)
	}
	if n := testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackLag); n != lagFallbacks+1 {
		t.Errorf("lag fallbacks %v, want %v", n, lagFallbacks+1)
	}
	if n := testmetrics.Value(t, reg, "bidgate_reads_total", "source", pgstore.SourcePrimary); n != primaryReads+1 {
		t.Errorf("primary reads %v, want %v", n, primaryReads+1)
	}
	if q := r.Querier(); q != pgstore.Querier(rp.primary) {
		t.Error("Querier is not the primary while the standby lags")
	}
	resume()
	awaitReplicaRead(t, r, reg, b.ID, bidgate.ModeCold)
	await.Until(t, 30*time.Second, "the lag to fall back to 0", nil, func() (float64, bool) {
		lag := testmetrics.Value(t, reg, "bidgate_read_replica_lag_seconds")
		return lag, lag == 0
	})
}

// A standby within MaxLag that has not replayed a row yet (a read right
// after its write) answers not-found; the read goes on to the primary. A
// row that exists nowhere is still not found.
func (rp replicaPair) notFoundRereadsPrimary(t *testing.T) {
	r, reg := rp.reads(t, pgstore.ReadConfig{MaxLag: time.Hour})
	warm := rp.create(t)
	awaitReplicaRead(t, r, reg, warm.ID, bidgate.ModeCold)
	rp.pauseReplay(t)
	notFound := func() float64 {
		return testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackNotFound)
	}

	tests := []struct {
		name    string
		id      int64
		wantErr error
	}{
		{"written on the primary only", rp.create(t).ID, nil},
		{"written nowhere", warm.ID + 1_000_000, bidgate.ErrAuctionNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := notFound()
			got, err := r.Auction(context.Background(), tt.id)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("read %d: %v, want %v", tt.id, err, tt.wantErr)
			}
			if tt.wantErr == nil && got.ID != tt.id {
				t.Errorf("read %d: got auction %d", tt.id, got.ID)
			}
			if n := notFound(); n != before+1 {
				t.Errorf("not_found fallbacks %v, want %v", n, before+1)
			}
		})
	}

	// A page from a notice the standby lacks yet is read on the primary
	// too: an id it has not replayed is not yet an id of nobody's.
	if _, err := rp.primary.Exec(context.Background(), `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
		VALUES ($1, 77, 'won', $2, 'replicated', 101, clock_timestamp())`, fmt.Sprintf("won-%d", warm.ID), warm.ID); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, after string
		wantErr     error
	}{
		{"a notice on the primary only", fmt.Sprintf("won-%d", warm.ID), nil},
		{"a notice nowhere", fmt.Sprintf("won-%d", warm.ID+1_000_000), bidgate.ErrNoticeNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := notFound()
			err := r.Do(context.Background(), func(ctx context.Context, s *pgstore.Store) error {
				p, err := s.Notifications(ctx, bidgate.NotificationsQuery{UserID: 77, After: tt.after, Limit: 10})
				if err == nil && (len(p.Items) != 0 || p.Unread != 1) {
					return fmt.Errorf("page %+v, want none newer and 1 unread", p)
				}
				return err
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("after %s: %v, want %v", tt.after, err, tt.wantErr)
			}
			if n := notFound(); n != before+1 {
				t.Errorf("not_found fallbacks %v, want %v", n, before+1)
			}
		})
	}
}

// The standby stopped as by a crash: every read still succeeds, from the
// primary, counted; started again, it serves again.
func (rp replicaPair) stoppedStandby(t *testing.T) {
	r, reg := rp.reads(t, pgstore.ReadConfig{MaxLag: time.Hour})
	a := rp.create(t)
	awaitReplicaRead(t, r, reg, a.ID, bidgate.ModeCold)

	rp.pair.StopStandby(t)
	fallbacks := func() float64 {
		return testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackDown) +
			testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackError)
	}
	await.Until(t, 30*time.Second, "a lag check to find the standby down", nil, func() (float64, bool) {
		got, err := r.Auction(context.Background(), a.ID)
		if err != nil || got.ID != a.ID {
			t.Fatalf("read with the standby stopped: %+v, %v", got, err)
		}
		down := testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total", "reason", pgstore.FallbackDown)
		return down, down > 0
	})
	if n := fallbacks(); n < 1 {
		t.Errorf("fallbacks %v with the standby stopped", n)
	}
	if q := r.Querier(); q != pgstore.Querier(rp.primary) {
		t.Error("Querier is not the primary while the standby is down")
	}

	rp.pair.StartStandby(t)
	awaitReplicaRead(t, r, reg, a.ID, bidgate.ModeCold)
}

// Without a standby every read is the primary's and nothing counts as a
// fallback.
func TestReadsWithoutReplica(t *testing.T) {
	db, _ := testdb.New(t, 2)
	reg := prometheus.NewRegistry()
	r, err := pgstore.OpenReads(context.Background(), db, pgstore.ReadConfig{}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Run(context.Background()); err != nil {
		t.Fatalf("Run without a standby: %v", err)
	}
	a, err := (&pgstore.Store{DB: db}).CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 7, Title: "primary only",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Auction(context.Background(), a.ID); err != nil || got.ID != a.ID {
		t.Fatalf("read: %+v, %v", got, err)
	}
	if _, err := r.Auction(context.Background(), a.ID+1); !errors.Is(err, bidgate.ErrAuctionNotFound) {
		t.Fatalf("read of a missing auction: %v", err)
	}
	if n := testmetrics.Value(t, reg, "bidgate_reads_total", "source", pgstore.SourcePrimary); n != 2 {
		t.Errorf("primary reads %v, want 2", n)
	}
	if n := testmetrics.Value(t, reg, "bidgate_read_replica_fallbacks_total"); n != 0 {
		t.Errorf("fallbacks %v without a standby", n)
	}
	if r.Querier() != pgstore.Querier(db) {
		t.Error("Querier is not the primary")
	}
}

func TestReadConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*pgstore.ReadConfig)
		wantErr bool
	}{
		{"defaults", func(*pgstore.ReadConfig) {}, false},
		{"a standby URL", func(c *pgstore.ReadConfig) { c.URL = "postgres://reader@standby:5432/bidgate" }, false},
		{"an unparsable URL", func(c *pgstore.ReadConfig) { c.URL = "postgres://[::1" }, true},
		{"zero MaxLag", func(c *pgstore.ReadConfig) { c.MaxLag = 0 }, true},
		{"negative MaxLag", func(c *pgstore.ReadConfig) { c.MaxLag = -time.Second }, true},
		{"zero pool", func(c *pgstore.ReadConfig) { c.MaxConns = 0 }, true},
		{"pool over the limit", func(c *pgstore.ReadConfig) { c.MaxConns = pgstore.MaxConnsLimit + 1 }, true},
		{"zero check interval", func(c *pgstore.ReadConfig) { c.CheckInterval = 0 }, true},
		{"zero check timeout", func(c *pgstore.ReadConfig) { c.CheckTimeout = 0 }, true},
		{"zero read timeout", func(c *pgstore.ReadConfig) { c.ReadTimeout = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := pgstore.DefaultReadConfig()
			tt.change(&c)
			if err := c.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
