package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/auth"
)

// testEnv is a harness for s that mints its tokens with key (nil: the key
// s trusts).
func testEnv(t *testing.T, s stack, key *auth.SigningKey) *Env {
	t.Helper()
	opt := DefaultOptions()
	opt.Targets = s.base
	opt.Metrics = s.metrics
	opt.PostgresURL = s.dbURL
	opt.RedisAddrs = testRedisAddr()
	opt.Key = s.key
	if key != nil {
		opt.Key = key
	}
	opt.Loader.Workers = 128
	opt.DrainTimeout = 30 * time.Second
	opt.LimitsDuration = 200 * time.Millisecond
	opt.LimitsConns = 4 // the suite stays under 40 PostgreSQL connections
	opt.Stderr = testWriter{t}
	e, err := NewEnv(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func requirePassed(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Checks) == 0 {
		t.Fatal("no audit checks ran")
	}
	for _, c := range res.Checks {
		if !c.Pass {
			t.Errorf("FAIL %s (%s): %d of %d: %v", c.ID, c.Name, c.Failed, c.Checked, c.Examples)
		}
	}
	if res.Drain != nil && !res.Drain.Drained {
		t.Errorf("pipeline did not drain: %s", res.Drain.Pending)
	}
}

// requireCPU checks that a span's CPU was measured for every party: the
// node through its real /metrics, bidbench, the Redis it uses and, on
// Linux, the machine.
func requireCPU(t *testing.T, what string, c *CPU) {
	t.Helper()
	switch {
	case c == nil:
		t.Errorf("%s: no CPU", what)
	case c.Server == nil || c.Server.Seconds <= 0:
		t.Errorf("%s: server CPU %+v (%s)", what, c.Server, c.ServerMissing)
	case c.Generator == nil || c.Generator.Seconds <= 0 || c.Generator.UsPerRequest <= 0:
		t.Errorf("%s: bidbench CPU %+v (%s)", what, c.Generator, c.GenMissing)
	case c.Redis == nil:
		t.Errorf("%s: Redis CPU missing (%s)", what, c.RedisMissing)
	case c.Decided == 0 || c.Server.UsPerDecided <= 0:
		t.Errorf("%s: %d decided, server %+v", what, c.Decided, *c.Server)
	case runtime.GOOS == "linux" && (c.Machine == nil || c.Machine.CPUs < 1 || c.Machine.BusyCores <= 0):
		t.Errorf("%s: machine CPU %+v (%s)", what, c.Machine, c.MachineMissing)
	}
}

// TestScenariosAgainstTheRealStack runs short versions of the scenarios
// against a real bidgate process and requires their audits to pass.
func TestScenariosAgainstTheRealStack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a bidgate process, PostgreSQL and Redis")
	}
	s := startStack(t)
	e := testEnv(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("flash-sale", func(t *testing.T) {
		c := DefaultFlashSale()
		c.Cold, c.Hot, c.HotRate, c.ColdRate, c.Duration, c.Warmup = 200, 2, 300, 40, 3*time.Second, time.Second
		c.ColdEndShare = 0.02
		c.RetryShare = 0.1
		// Few enough bidders that minting their tokens (once each, under the
		// race detector) does not load the harness; still well under the
		// 5 bids/s each that bidgate allows.
		c.Bidders = 400
		c.Floor = true
		res, err := e.FlashSale(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := WriteOutputs(res, filepath.Join(dir, "flash-sale.json"), true); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		WriteText(&text, res)
		t.Log(text.String())
		requirePassed(t, res)

		// The load ran. Most of its ~1,900 bids race each other on two hot
		// auctions and lose as too low; how many win depends on the
		// machine's speed, which this test does not judge.
		if got := res.Latency.Count(Created); got < 200 {
			t.Errorf("only %d bids accepted", got)
		}
		if res.Latency.Count(Replayed) == 0 {
			t.Error("no retry was answered as a replay (200)")
		}
		if n := res.Latency.Count(ServerError) + res.Latency.Count(Transport) + res.Latency.Count(RateLimited); n > 0 {
			t.Errorf("%d 5xx, transport errors or 429s", n)
		}
		requireCPU(t, "the load", res.CPU)
		requireWarmupApart(t, res)
		// --floor: the load's request rate, for as long, to the floor.
		if f := res.Floor; f == nil || f.Missing != "" || f.Answered != f.Sent || f.Sent != int(f.Offered*c.Duration.Seconds()) ||
			f.Offered != float64(res.CPU.Requests)/c.Duration.Seconds() || f.UsPerAnswer <= 0 ||
			f.BidgateUsPerDecided != res.CPU.Server.UsPerDecided || f.DecidedVsFloor != f.BidgateUsPerDecided/f.UsPerAnswer || f.RequestVsFloor <= 0 {
			t.Errorf("floor: %+v", f)
		} else if !strings.Contains(text.String(), "floor: the load's") {
			t.Error("the text report has no floor line")
		}
		for _, h := range res.Hot {
			if h.Extensions == 0 || !h.FinalEnd.After(h.OriginalEnd) {
				t.Errorf("hot auction %d was not extended by anti-sniping: %+v", h.ID, h)
			}
			if h.LateSent == 0 || h.LateRefused != h.LateSent {
				t.Errorf("hot auction %d: %d of %d late bids refused", h.ID, h.LateRefused, h.LateSent)
			}
		}
		if len(res.Limits) != 6 || len(res.Ratios) != 6 {
			t.Errorf("%d limits, %d ratios", len(res.Limits), len(res.Ratios))
		}
		for _, l := range res.Limits {
			if l.Err != "" || l.DecidedPerSec <= 0 {
				t.Errorf("limit %s: %+v", l.Name, l)
			}
		}
		html, err := os.ReadFile(res.Files.HTML)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(html), "<svg") < 3 || strings.Contains(string(html), "<script") {
			t.Errorf("the HTML report should hold inline SVG charts and no script")
		}
		if !strings.Contains(string(html), "Floor: the load's") {
			t.Error("the HTML report has no floor line")
		}
		for _, f := range []string{res.Files.JSON, res.Files.Records} {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Errorf("output %s: %v", f, err)
			}
		}
	})

	// Viewers over three loopback source addresses and pollers on a small
	// sale: every viewer gets every state in order and the database's final
	// one; the report has their numbers.
	t.Run("flash-sale with viewers and pollers", func(t *testing.T) {
		c := DefaultFlashSale()
		c.Cold, c.Hot, c.HotRate, c.ColdRate, c.Duration, c.Warmup = 20, 1, 100, 5, 3*time.Second, 0
		c.Bidders, c.BuyNows, c.LateBids = 100, 0, 2
		c.Viewers, c.ViewersPerSource, c.ViewerConnectRate, c.Pollers = 9, 3, 50, 40
		res, err := e.FlashSale(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteOutputs(res, filepath.Join(t.TempDir(), "viewers.json"), false); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		WriteText(&text, res)
		t.Log(text.String())
		requirePassed(t, res)
		for _, id := range []string{CheckViewerOrder, CheckViewerFinal} {
			if got := find(t, res.Checks, id); got.Checked == 0 {
				t.Errorf("%s checked nothing: %+v", id, got)
			}
		}
		v := res.Viewers
		switch {
		case v == nil:
			t.Fatal("no viewers in the result")
		case v.Connected != 9 || v.Failed != 0 || v.Dropped != 0 || v.Closed != 9 || v.SourceAddrs != 3:
			t.Errorf("viewers: %d connected from %d sources, %d failed %v (%s), %d dropped %v, %d closed",
				v.Connected, v.SourceAddrs, v.Failed, v.FailedBy, v.FirstError, v.Dropped, v.DroppedBy, v.Closed)
		case v.Delivered < 3*9 || v.Lag.Count == 0 || v.Lag.P99 <= 0 || v.MessagesPerSec <= 0 || v.Unstamped < 9:
			t.Errorf("viewers' messages: %d (%d unstamped), %.1f/s, lag %+v", v.Delivered, v.Unstamped, v.MessagesPerSec, v.Lag)
		case v.CPUMissing != "" || v.NodeCPUPerMessageUs <= 0 || v.CPUMessages == 0:
			t.Errorf("viewers' CPU: %.1f µs over %d messages (%s)", v.NodeCPUPerMessageUs, v.CPUMessages, v.CPUMissing)
		case v.MemoryMissing != "" || v.RSSBefore <= 0 || v.RSSAfter <= 0:
			t.Errorf("viewers' memory: %.0f → %.0f bytes (%s)", v.RSSBefore, v.RSSAfter, v.MemoryMissing)
		}
		p := res.Pollers
		switch {
		case p == nil:
			t.Fatal("no pollers in the result")
		case p.Sent < 100 || p.Errors != 0 || p.Other != 0 || p.OK+p.NotModified != p.Sent || p.Latency.Count != p.Sent:
			t.Errorf("pollers: %+v", p)
		}
		html, err := os.ReadFile(res.Files.HTML)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"viewers: 9 of 9 connected", "pollers: 40 GET/s"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("the text report lacks %q", want)
			}
		}
		for _, want := range []string{"<h2>Viewers</h2>", "<h2>Pollers</h2>", "per 1,000 viewers"} {
			if !strings.Contains(string(html), want) {
				t.Errorf("the HTML report lacks %q", want)
			}
		}
	})

	t.Run("close-burst", func(t *testing.T) {
		c := DefaultCloseBurst()
		c.Auctions, c.Lead, c.BidShare, c.LateBids, c.Timeout = 1000, 5*time.Second, 0.2, 10, 30*time.Second
		res, err := e.CloseBurstRun(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		requirePassed(t, res)
		b := res.CloseBurst
		t.Logf("close-burst: %d closed, the last %.2fs after the first end, %.0f/s", b.Closed, b.AfterFirstEnd, b.ClosePerSec)
		if b.Closed != c.Auctions || b.Bids == 0 {
			t.Errorf("close-burst: %+v", b)
		}
		if cpu := res.CPU; cpu == nil || cpu.Server == nil || cpu.Decided == 0 || cpu.Server.UsPerDecided <= 0 || b.NodeCPUPerCloseUs <= 0 {
			t.Errorf("close-burst CPU: %+v, %.1f µs per close", cpu, b.NodeCPUPerCloseUs)
		}
	})

	t.Run("hot-max", func(t *testing.T) {
		c := DefaultHotMax()
		c.StartRate, c.Step, c.MaxSteps, c.P99, c.Floor = 200, 700*time.Millisecond, 2, time.Second, true
		res, err := e.HotMax(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		requirePassed(t, res)
		r := res.Ramp
		if len(r.Steps) == 0 || r.Best == nil {
			t.Fatalf("ramp: %+v", r)
		}
		for _, st := range r.Steps {
			requireCPU(t, fmt.Sprintf("step %d", st.N), &st.CPU)
		}
		if v := r.VsLimit; v == nil || !strings.HasPrefix(v.Limit, "Redis bid script, 64 caller(s)") || v.DecidedFraction <= 0 {
			t.Errorf("best step against the Redis limit: %+v", v)
		}
		if f := r.Floor; f == nil || f.Missing != "" || f.Answered != f.Sent || f.Sent != int(r.Best.Offered*c.Step.Seconds()) ||
			f.UsPerAnswer <= 0 || f.BidgateUsPerAnswer <= 0 || f.VsFloor <= 0 {
			t.Errorf("best step against the floor: %+v", f)
		}
	})

	// The flash sale's SQL path (above 10,000 cold auctions) gives the
	// same auctions reserves and buy-now prices as its API path.
	t.Run("bulk auctions with reserves and buy-now prices", func(t *testing.T) {
		now, err := e.dbNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		specs, err := e.createSQL(ctx, bulkAuctions{N: 20, Title: "bidbench bulk rules", StartPrice: cents(coldStartCents),
			MinIncrement: cents(incCents), Late: now.Add(time.Hour), LateSpread: time.Second, ExtendBy: time.Second,
			ReserveEvery: 5, Reserve: cents(coldReserveCents), BuyNowEvery: 10, BuyNow: cents(coldBuyNowCents)})
		if err != nil {
			t.Fatal(err)
		}
		var reserves, buyNows int
		for _, s := range specs {
			if s.ReservePrice != "" {
				reserves++
				if s.ReservePrice != cents(coldReserveCents) {
					t.Errorf("auction %d: reserve %s", s.ID, s.ReservePrice)
				}
			}
			if s.BuyNowPrice != "" {
				buyNows++
				if s.BuyNowPrice != cents(coldBuyNowCents) {
					t.Errorf("auction %d: buy-now price %s", s.ID, s.BuyNowPrice)
				}
			}
		}
		if reserves != 4 || buyNows != 2 {
			t.Errorf("%d reserves, %d buy-now prices among 20; want 4 and 2", reserves, buyNows)
		}
	})

	// Where the default --metrics finds the other nodes: the admin
	// endpoint's member list, read with an operator token bidbench mints.
	t.Run("cluster members", func(t *testing.T) {
		members, err := clusterMembers(ctx, loopbackHTTPClient(), strings.TrimSuffix(s.metrics, "/metrics"), e.tokens)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimPrefix(s.base, "http://"); len(members) != 1 || members[0] != want {
			t.Errorf("members %v, want [%s]", members, want)
		}
	})

	// A small reads run: every GET of the floor, the cold and the hot
	// auction answered 200, and every figure of the report filled.
	t.Run("reads", func(t *testing.T) {
		c := DefaultReads()
		c.Rate, c.Duration, c.Repeat = 300, 1500*time.Millisecond, 1
		res, err := e.ReadsRun(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteOutputs(res, filepath.Join(t.TempDir(), "reads.json"), true); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		WriteText(&text, res)
		t.Log(text.String())
		r := res.Reads
		if r == nil || r.ColdAuction == 0 || r.HotAuction == 0 || r.FloorBodyBytes < 100 || r.FloorTarget == "" {
			t.Fatalf("reads: %+v", r)
		}
		if len(r.Runs) != 3 || len(r.Medians) != 3 {
			t.Fatalf("%d runs, %d medians; want 3 and 3", len(r.Runs), len(r.Medians))
		}
		for i, run := range r.Runs {
			want := int(c.Rate * c.Duration.Seconds())
			switch {
			case run.Kind != readKinds[i] || run.Round != 1:
				t.Errorf("run %d: %s round %d", i, run.Kind, run.Round)
			case run.Sent != want || run.Answered != int64(want) || run.Status["200"] != int64(want) || len(run.Status) != 1:
				t.Errorf("%s: %d sent, %d answered %v; want %d, all 200", run.Kind, run.Sent, run.Answered, run.Status, want)
			case run.AnsweredPerSec <= 0 || run.Latency.Count != int64(want) || run.Latency.P99 <= 0 || run.Latency.Max < run.Latency.P99:
				t.Errorf("%s: %.0f answered/s, latency %+v", run.Kind, run.AnsweredPerSec, run.Latency)
			case run.ServerMissing != "" || run.GenUsPerRequest <= 0:
				t.Errorf("%s: server CPU missing (%s) or bidbench's %.1f µs/request", run.Kind, run.ServerMissing, run.GenUsPerRequest)
			case run.Kind != ReadFloor && run.ServerUsPerAnswer <= 0:
				t.Errorf("%s: bidgate's CPU per answer %.1f µs", run.Kind, run.ServerUsPerAnswer)
			}
		}
		for i, k := range r.Medians {
			if k.Kind != readKinds[i] || k.Runs != 1 || k.AnsweredPerSec != r.Runs[i].AnsweredPerSec || k.P99 != r.Runs[i].Latency.P99 {
				t.Errorf("median %d: %+v of run %+v", i, k, r.Runs[i])
			}
		}
		if f := r.Medians[0]; f.ServerUsPerAnswer > 0 && (f.VsFloor != 1 || r.Medians[1].VsFloor <= 0) {
			t.Errorf("ratios to the floor: %+v", r.Medians)
		}
		for _, want := range []string{"reads: GET /auctions/", "medians", "× floor"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("the text report lacks %q", want)
			}
		}
	})

	// A small browse run over its own seeded volume: every query kind
	// sent and answered 200, with items, and the report filled.
	t.Run("browse", func(t *testing.T) {
		c := DefaultBrowse()
		c.Auctions, c.Bids, c.Sellers, c.Bidders, c.Rate, c.Duration = 2_000, 20_000, 50, 500, 50, 2*time.Second
		c.Solo = 500 * time.Millisecond
		res, err := e.BrowseRun(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteOutputs(res, filepath.Join(t.TempDir(), "browse.json"), false); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		WriteText(&text, res)
		t.Log(text.String())
		b := res.Browse
		switch {
		case b == nil:
			t.Fatal("no browse in the result")
		case !b.Seeded || b.Auctions != 2_000 || b.Bids < 10_000 || b.Bids > 30_000 || b.LastAuction-b.FirstAuction != 1_999:
			t.Errorf("volume: %+v", b)
		case b.Actions != 100 || b.Requests < 100 || b.NotOK != 0 || b.HarnessError != "":
			t.Errorf("%d actions, %d requests, %d not 200 (%s)", b.Actions, b.Requests, b.NotOK, b.HarnessError)
		case b.PGMissing != "" || b.PGCPUSeconds <= 0 || b.PGUsPerQuery <= 0 || b.PGProcesses == 0:
			t.Errorf("PostgreSQL CPU: %.2f s, %.0f µs/request, %d processes (%s)", b.PGCPUSeconds, b.PGUsPerQuery, b.PGProcesses, b.PGMissing)
		}
		// The rows agree with their auctions: seq 1..bid_count, the last
		// one's bidder leads at its amount.
		var disagree int
		err = e.db.QueryRow(ctx, `SELECT count(*) FROM auction a
			LEFT JOIN LATERAL (SELECT count(*) AS n, max(seq) AS top FROM bid WHERE auction_id = a.id) c ON true
			LEFT JOIN bid l ON l.auction_id = a.id AND l.seq = a.bid_count
			WHERE a.id BETWEEN $1 AND $2 AND (c.n <> a.bid_count OR COALESCE(c.top, 0) <> a.persisted_seq
			   OR l.bidder_id IS DISTINCT FROM a.leader_id OR (a.bid_count > 0 AND l.amount <> a.current_price))`,
			b.FirstAuction, b.LastAuction).Scan(&disagree)
		if err != nil {
			t.Fatal(err)
		}
		if disagree != 0 {
			t.Errorf("%d seeded auctions disagree with their bid rows", disagree)
		}
		if len(b.Kinds) != len(browseKinds) {
			t.Fatalf("%d kinds: %+v", len(b.Kinds), b.Kinds)
		}
		for i, k := range b.Kinds {
			switch {
			case k.Kind != browseKinds[i] || k.Actions == 0 || k.Requests < int64(k.Actions):
				t.Errorf("%s: %d actions, %d requests", k.Kind, k.Actions, k.Requests)
			case k.Status["200"] != k.Requests || len(k.Status) != 1:
				t.Errorf("%s: answers %v, want all 200", k.Kind, k.Status)
			case k.Items == 0 && k.Kind != BrowseMyBids: // a state filter may match none
				t.Errorf("%s: no items in %d answers", k.Kind, k.Requests)
			case k.Latency.Count != k.Requests || k.Latency.P99 <= 0 || k.Latency.Max < k.Latency.P99:
				t.Errorf("%s: latency %+v", k.Kind, k.Latency)
			}
		}
		if len(b.Solo) != len(browseKinds) {
			t.Fatalf("%d kinds alone", len(b.Solo))
		}
		for i, k := range b.Solo {
			if k.Kind != browseKinds[i] || k.Actions != 25 || k.Status["200"] != k.Requests || len(k.Status) != 1 ||
				k.PGMissing != "" || k.PGCPUSeconds < 0 {
				t.Errorf("%s alone: %+v", browseKinds[i], k)
			}
		}
		for _, want := range []string{"browse: 2000 auctions", "my-auctions", "PostgreSQL CPU: ", "each kind alone"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("the text report lacks %q", want)
			}
		}
		html, err := os.ReadFile(res.Files.HTML)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"<h2>Browse</h2>", "my-auctions", "µs per request"} {
			if !strings.Contains(string(html), want) {
				t.Errorf("the HTML report lacks %q", want)
			}
		}
	})

	// The volume above browsed again without seeding, beside a small flash
	// sale whose audit passes.
	t.Run("browse beside a flash sale", func(t *testing.T) {
		c := DefaultBrowse()
		c.Seed, c.Sellers, c.Bidders, c.Rate, c.Duration = false, 50, 500, 50, 3*time.Second
		c.WithFlashSale, c.FlashCold, c.FlashColdRate, c.FlashHot, c.FlashHotRate = true, 50, 10, 1, 50
		res, err := e.BrowseRun(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		WriteText(&text, res)
		t.Log(text.String())
		requirePassed(t, res)
		b := res.Browse
		switch {
		case b.Seeded || b.Auctions != 2_000 || b.Bids < 10_000:
			t.Errorf("the volume seeded before was not found: %+v", b)
		case b.Actions != 150 || b.NotOK != 0:
			t.Errorf("%d actions, %d not 200", b.Actions, b.NotOK)
		case b.FlashSale == nil || b.FlashSale.Latency.Count(Created) == 0 || b.FlashSale.Latency.Errors() != 0:
			t.Errorf("flash sale beside: %+v", b.FlashSale)
		case b.FlashSale.LoadStart.Sub(res.LoadStart).Abs() > time.Millisecond:
			t.Errorf("the flash sale's load started at %s, the browse load at %s", b.FlashSale.LoadStart, res.LoadStart)
		}
	})

	// Last: its failed authentications count against the address's budget.
	t.Run("foreign key", func(t *testing.T) {
		spec, err := e.api.createAuction(newAuction{SellerID: sellerID(0), Title: "bidbench foreign key", StartPrice: cents(coldStartCents),
			MinIncrement: cents(incCents), EndTime: formatEnd(time.Now().Add(time.Hour)), ExtendBySeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		other, err := auth.GenerateKey("EdDSA")
		if err != nil {
			t.Fatal(err)
		}
		f := testEnv(t, s, other)
		_, err = f.api.createAuction(newAuction{SellerID: sellerID(0), Title: "bidbench foreign key", StartPrice: cents(coldStartCents),
			MinIncrement: cents(incCents), EndTime: formatEnd(time.Now().Add(time.Hour)), ExtendBySeconds: 1})
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "--key") {
			t.Errorf("creating an auction with a key the node does not trust: %v", err)
		}
		f.bidders.reset(1)
		rec := &Recorder{}
		ld := f.loader(ctx, rec)
		ld.Submit(Job{AuctionID: spec.ID, Key: uuid.New(), BidderID: f.bidders.id(), Amount: cents(coldStartCents + incCents),
			Kind: KindBid, Intended: time.Now()})
		ld.Close()
		c := checkAuthorized(rec.Records())
		if c.Pass || c.Failed != 1 {
			t.Errorf("a bid with a foreign token: %+v", c)
		}
	})
}

// requireWarmupApart checks that a flash sale's warm-up requests are in
// its records and its audit but not in its latency: the summary counts
// only requests intended from the measured start on, the warm-up's the
// others, and the persisted check saw every 201 of both.
func requireWarmupApart(t *testing.T, res *Result) {
	t.Helper()
	if res.Warmup == nil || res.Warmup.Requests == 0 {
		t.Fatalf("no warm-up summary: %+v", res.Warmup)
	}
	recs := res.Records()
	created := 0
	for _, r := range recs {
		if r.Outcome == Created {
			created++
		}
	}
	var measured int64
	for _, r := range recs {
		if !r.Intended.Before(res.LoadStart) {
			measured++
		}
	}
	if int64(len(recs))-measured != res.Warmup.Requests || res.Latency.Requests != measured {
		t.Errorf("%d records: %d in the warm-up's summary, %d in the latency; want %d and %d",
			len(recs), res.Warmup.Requests, res.Latency.Requests, int64(len(recs))-measured, measured)
	}
	for _, c := range res.Checks {
		if c.ID == CheckPersisted && c.Checked != created {
			t.Errorf("the persisted check saw %d 201s of %d, warm-up included", c.Checked, created)
		}
	}
}
