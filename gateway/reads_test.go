package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/fanout"
	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/shard"
)

// startCachedServer serves a shard's GETs through a running read cache.
func startCachedServer(t *testing.T) *testServer { return startCachedServerTB(t) }

func startCachedServerTB(t testing.TB) *testServer {
	t.Helper()
	db, _ := testdb.New(t, 16)
	rdb := testredis.Client(t)
	svc := shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, StoreTimeout: testStoreTimeout}, prometheus.NewRegistry())
	cache := fanout.NewCache(rdb, svc, fanout.CacheConfig{Size: 100, MaxAge: time.Hour}, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache run: %v", err)
		}
	})
	return serveWith(t, Config{Reads: cache}, svc, db.Ping)
}

func TestNoneMatch(t *testing.T) {
	const tag = `"a1-s2-OPEN-COLD-e5"`
	tests := []struct {
		header string
		want   bool
	}{
		{tag, true},
		{"W/" + tag, true},
		{`"x", ` + tag, true},
		{`"x",W/` + tag + `, "y"`, true},
		{"*", true},
		{` * `, true},
		{`"a1-s2-OPEN-COLD-e6"`, false},
		{`"x"`, false},
		{`a1-s2-OPEN-COLD-e5`, false}, // unquoted: malformed
		{`"unterminated`, false},
		{`"x" "y"`, false},
		{`, ,`, false},
		{`W/`, false},
	}
	for _, tc := range tests {
		if got := noneMatch([]byte(tc.header), tag); got != tc.want {
			t.Errorf("noneMatch(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestGetAuctionCaching(t *testing.T) {
	s := startCachedServer(t)
	id := s.createAuction(with(validAuction(), "reservePrice", "5000"))
	path := fmt.Sprintf("/auctions/%d", id)

	first := s.do("GET", path, nil)
	tag := first.header.Get("ETag")
	if first.status != 200 || tag == "" || first.header.Get("Cache-Control") != openCacheControl {
		t.Fatalf("GET: %d ETag %q Cache-Control %q", first.status, tag, first.header.Get("Cache-Control"))
	}
	if first.shows("5000") {
		t.Fatalf("the reserve shows through the cache: %s", first.raw)
	}

	for _, tc := range []struct {
		name, inm string
		want      int
	}{
		{"the same version", tag, 304},
		{"weak", "W/" + tag, 304},
		{"in a list", `"a0-s0-OPEN-COLD-e0", ` + tag, 304},
		{"any", "*", 304},
		{"another version", `"a0-s0-OPEN-COLD-e0"`, 200},
	} {
		r := s.do("GET", path, nil, "If-None-Match", tc.inm)
		if r.status != tc.want || r.header.Get("ETag") != tag || r.header.Get("Cache-Control") != openCacheControl {
			t.Fatalf("%s: %d ETag %q Cache-Control %q, want %d with %q", tc.name, r.status, r.header.Get("ETag"), r.header.Get("Cache-Control"), tc.want, tag)
		}
		if tc.want == 304 && r.raw != "" {
			t.Fatalf("%s: a 304 with a body: %q", tc.name, r.raw)
		}
	}

	// Read-your-writes: the bid's seq in the next GET, whatever the cache
	// has heard yet; a new version for the old tag.
	bid := s.bid(42, id, uuid.NewString(), map[string]any{"amount": "1100"})
	if bid.status != 201 {
		t.Fatalf("bid: %d %s", bid.status, bid.raw)
	}
	seq := int64(bid.body["seq"].(float64))
	after := s.do("GET", fmt.Sprintf("%s?minSeq=%d", path, seq), nil, "If-None-Match", tag)
	if after.status != 200 || int64(after.body["bidCount"].(float64)) < seq || after.header.Get("ETag") == tag {
		t.Fatalf("GET ?minSeq=%d after the bid: %d ETag %q %s", seq, after.status, after.header.Get("ETag"), after.raw)
	}

	// A cancelled auction never changes: a CDN may keep it.
	gone := s.createAuction(validAuction())
	if r := s.do("POST", fmt.Sprintf("/auctions/%d/cancel", gone), nil, as(t, testSeller, auth.ScopeSell)...); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	r := s.do("GET", fmt.Sprintf("/auctions/%d", gone), nil)
	if r.status != 200 || r.body["status"] != "CANCELLED" || r.header.Get("Cache-Control") != finalCacheControl {
		t.Fatalf("GET of a cancelled auction: %d Cache-Control %q %s", r.status, r.header.Get("Cache-Control"), r.raw)
	}
}

func TestGetAuctionRejectsBadMinSeq(t *testing.T) {
	s := startCachedServer(t)
	id := s.createAuction(validAuction())
	for _, q := range []string{"minSeq=-1", "minSeq=01", "minSeq=x", "minSeq=1.5", "minSeq=", "minSeq=+1",
		"minSeq=99999999999999999999", "minSeq=1&minSeq=2"} {
		wantProblem(t, s.do("GET", fmt.Sprintf("/auctions/%d?%s", id, q), nil), 400, "invalid_query")
	}
	if r := s.do("GET", fmt.Sprintf("/auctions/%d?minSeq=0", id), nil); r.status != 200 {
		t.Fatalf("minSeq=0: %d %s", r.status, r.raw)
	}
}
