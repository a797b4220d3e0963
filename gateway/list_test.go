package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/persist/pgstore"
	"bidgate/shard"
)

// page is one answer of a list route.
type page struct {
	ids  []int64
	next string
	raw  []any
}

// list reads path, which must answer 200 with a page.
func (s *testServer) list(path string, header ...string) page {
	s.t.Helper()
	r := s.do("GET", path, nil, header...)
	if r.status != 200 {
		s.t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
	}
	items, ok := r.body["items"].([]any)
	if !ok {
		s.t.Fatalf("GET %s: no items in %s", path, r.raw)
	}
	p := page{raw: items}
	for _, it := range items {
		p.ids = append(p.ids, int64(it.(map[string]any)["id"].(float64)))
	}
	if n, ok := r.body["nextCursor"].(string); ok {
		p.next = n
	}
	return p
}

// listAll pages through path (a query string included) with pages of
// limit, and returns the ids in order.
func (s *testServer) listAll(path string, limit int, header ...string) []int64 {
	s.t.Helper()
	var ids []int64
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	p := s.list(fmt.Sprintf("%s%slimit=%d", path, sep, limit), header...)
	for {
		ids = append(ids, p.ids...)
		if p.next == "" {
			return ids
		}
		if len(ids) > 5_000 { // these tests list far fewer
			s.t.Fatalf("%s: paging does not end", path)
		}
		p = s.list(fmt.Sprintf("%s%slimit=%d&cursor=%s", path, sep, limit, p.next), header...)
	}
}

// seed creates auctions straight in the store: n, ending a minute apart
// from an hour ahead, with start prices that differ.
func seed(t testing.TB, db *pgxpool.Pool, seller int64, n int, title func(i int) string) []int64 {
	t.Helper()
	st := &pgstore.Store{DB: db}
	base := time.Now().Add(time.Hour).Truncate(time.Second)
	ids := make([]int64, n)
	for i := range n {
		a, err := st.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: seller, Title: title(i),
			StartPrice: decimal.NewFromInt(int64(100 + (i*37)%n)), MinIncrement: decimal.NewFromInt(1),
			EndTime: base.Add(time.Duration((i*7919)%n) * time.Minute), ExtendWindow: time.Minute, ExtendBy: time.Minute})
		if err != nil {
			t.Fatalf("seed auction %d: %v", i, err)
		}
		ids[i] = a.ID
	}
	return ids
}

func lot(i int) string { return fmt.Sprintf("Lot %d", i) }

func TestListRejectsBadQuery(t *testing.T) {
	s, _ := startServer(t)
	cases := []struct {
		name, query, param string
	}{
		{"unknown parameter", "colour=red", "colour"},
		{"parameter in another case", "Limit=5", "Limit"},
		{"repeated limit", "limit=5&limit=6", "limit"},
		{"repeated status", "status=OPEN&status=OPEN", "status"},
		{"empty status", "status=", "status"},
		{"bare parameter", "hot", "hot"},
		{"limit zero", "limit=0", "limit"},
		{"limit over 100", "limit=101", "limit"},
		{"limit with leading zero", "limit=05", "limit"},
		{"limit not a number", "limit=ten", "limit"},
		{"limit huge", "limit=99999999999999999999", "limit"},
		{"status in lower case", "status=open", "status"},
		{"unknown status", "status=PENDING", "status"},
		{"unknown sort", "sort=price_asc", "sort"},
		{"hot as yes", "hot=yes", "hot"},
		{"hot as 1", "hot=1", "hot"},
		{"seller zero", "sellerId=0", "sellerId"},
		{"seller negative", "sellerId=-4", "sellerId"},
		{"seller with sign", "sellerId=%2B4", "sellerId"},
		{"seller too large", "sellerId=9223372036854775808", "sellerId"},
		{"endingAfter not a time", "endingAfter=tomorrow", "endingAfter"},
		{"endingAfter without zone", "endingAfter=2030-01-02T15:04:05", "endingAfter"},
		{"endingBefore a date only", "endingBefore=2030-01-02", "endingBefore"},
		{"endingBefore not after endingAfter", "endingAfter=2030-01-02T15:04:05Z&endingBefore=2030-01-02T15:04:05Z", "endingBefore"},
		{"q too long", "q=" + strings.Repeat("a", 201), "q"},
		{"q with NUL", "q=a%00b", "q"},
		{"q not UTF-8", "q=caf%E9", "q"},
		{"q only spaces", "q=%20%20", "q"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/auctions", "/me/auctions"} {
				r := s.do("GET", path+"?"+c.query, nil, as(t, testSeller, auth.ScopeSell)...)
				wantProblem(t, r, 400, "invalid_query")
				if detail := r.body["detail"].(string); !strings.Contains(detail, c.param) {
					t.Errorf("%s?%s: detail %q does not name %s", path, c.query, detail, c.param)
				}
			}
		})
	}
	// The longest allowed q is served.
	s.list("/auctions?q=" + strings.Repeat("é", 200))
}

func TestListSortsAndFilters(t *testing.T) {
	s, db := startServer(t)
	const other int64 = 9_000_011
	ids := seed(t, db, testSeller, 30, lot)
	theirs := seed(t, db, other, 5, lot)
	all := append(slices.Clone(ids), theirs...)
	rows := map[int64]bidgate.Auction{}
	st := &pgstore.Store{DB: db}
	for _, id := range all {
		a, err := st.Auction(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		rows[id] = a
	}
	// Two cancelled, one closed, one hot.
	for _, id := range ids[:2] {
		if _, ok, err := st.CancelCold(context.Background(), id); err != nil || !ok {
			t.Fatalf("cancel %d: %v %v", id, ok, err)
		}
	}
	if _, err := db.Exec(context.Background(), "UPDATE auction SET status = 'CLOSED', closed_at = clock_timestamp() WHERE id = $1", ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := st.SetHot(context.Background(), ids[3]); err != nil {
		t.Fatal(err)
	}
	status := func(id int64) bidgate.Status {
		switch {
		case id == ids[0] || id == ids[1]:
			return bidgate.StatusCancelled
		case id == ids[2]:
			return bidgate.StatusClosed
		}
		return bidgate.StatusOpen
	}
	mid := rows[ids[10]].EndTime
	// want selects the expected auctions in sort order.
	want := func(keep func(bidgate.Auction) bool, sort bidgate.ListSort) []int64 {
		var out []bidgate.Auction
		for _, id := range all {
			a := rows[id]
			a.Status = status(id)
			if keep(a) {
				out = append(out, a)
			}
		}
		slices.SortFunc(out, func(a, b bidgate.Auction) int {
			switch sort {
			case bidgate.SortNewest:
				return cmpOr(b.CreatedAt.Compare(a.CreatedAt), int(b.ID-a.ID))
			case bidgate.SortPriceDesc:
				return cmpOr(b.CurrentPrice.Cmp(a.CurrentPrice), int(b.ID-a.ID))
			}
			return cmpOr(a.EndTime.Compare(b.EndTime), int(a.ID-b.ID))
		})
		var got []int64
		for _, a := range out {
			got = append(got, a.ID)
		}
		return got
	}
	open := func(a bidgate.Auction) bool { return a.Status == bidgate.StatusOpen }
	cases := []struct {
		name  string
		query string
		sort  bidgate.ListSort
		keep  func(bidgate.Auction) bool
	}{
		{"default: open, ending", "", bidgate.SortEnding, open},
		{"newest", "sort=newest", bidgate.SortNewest, open},
		{"price", "sort=price_desc", bidgate.SortPriceDesc, open},
		{"cancelled", "status=CANCELLED", bidgate.SortEnding, func(a bidgate.Auction) bool { return a.Status == bidgate.StatusCancelled }},
		{"closed, newest", "status=CLOSED&sort=newest", bidgate.SortNewest, func(a bidgate.Auction) bool { return a.Status == bidgate.StatusClosed }},
		{"one seller", fmt.Sprintf("sellerId=%d", other), bidgate.SortEnding, func(a bidgate.Auction) bool { return open(a) && a.SellerID == other }},
		{"one seller by price", fmt.Sprintf("sellerId=%d&sort=price_desc", other), bidgate.SortPriceDesc, func(a bidgate.Auction) bool { return open(a) && a.SellerID == other }},
		{"ending after", "endingAfter=" + url.QueryEscape(mid.Format(time.RFC3339Nano)), bidgate.SortEnding, func(a bidgate.Auction) bool { return open(a) && !a.EndTime.Before(mid) }},
		{"ending before, newest", "sort=newest&endingBefore=" + url.QueryEscape(mid.Format(time.RFC3339Nano)), bidgate.SortNewest, func(a bidgate.Auction) bool { return open(a) && a.EndTime.Before(mid) }},
		{"hot", "hot=true", bidgate.SortEnding, func(a bidgate.Auction) bool { return open(a) && a.ID == ids[3] }},
		{"cold by price", "hot=false&sort=price_desc", bidgate.SortPriceDesc, func(a bidgate.Auction) bool { return open(a) && a.ID != ids[3] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := want(c.keep, c.sort)
			for _, limit := range []int{1, 4, 100} {
				if got := s.listAll("/auctions?"+c.query, limit); !slices.Equal(got, w) {
					t.Fatalf("limit %d: got %v, want %v", limit, got, w)
				}
			}
		})
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func TestListSearchesTitles(t *testing.T) {
	s, db := startServer(t)
	titles := []string{"Vintage Leica M3", "Leica Summicron lens", "Canon AE-1 body", "Máy ảnh Leica cũ", "Nikon F2"}
	ids := seed(t, db, testSeller, len(titles), func(i int) string { return titles[i] })
	cases := []struct {
		q    string
		want []int // indexes into titles
	}{
		{"leica", []int{0, 1, 3}},
		{"LEICA", []int{0, 1, 3}},
		{"leica -lens", []int{0, 3}},
		{`"leica m3"`, []int{0}},
		{"canon or nikon", []int{2, 4}},
		{"máy ảnh", []int{3}},
		{"ae", []int{2}},
		{"leic", nil}, // whole words only
		{"'; DROP TABLE auction; --", nil},
		{"!!!", nil}, // no word at all
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			got := s.listAll("/auctions?q="+url.QueryEscape(c.q), 100)
			var want []int64
			for _, i := range c.want {
				want = append(want, ids[i])
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("q=%s: got %v, want %v", c.q, got, want)
			}
		})
	}
}

// TestListPagesWithoutDuplicateOrGap pages through ~300 open auctions in
// each sort while other goroutines create auctions, cancel some and close
// some: no auction is listed twice, and every auction open both before and
// after the paging is listed.
func TestListPagesWithoutDuplicateOrGap(t *testing.T) {
	for _, sort := range []bidgate.ListSort{bidgate.SortEnding, bidgate.SortNewest, bidgate.SortPriceDesc} {
		t.Run(string(sort), func(t *testing.T) {
			s, db := startServer(t)
			ids := seed(t, db, testSeller, 300, lot)
			before := openIDs(t, db)

			st := &pgstore.Store{DB: db}
			ctx, stop := context.WithCancel(context.Background())
			rounds := make(chan struct{})
			var g errgroup.Group
			victims := slices.Clone(ids)
			next := func() int64 {
				if len(victims) <= 180 {
					return 0 // 120 cancelled or closed: enough
				}
				id := victims[len(victims)-1]
				victims = victims[:len(victims)-1]
				return id
			}
			create := func(ctx context.Context, i int) error {
				_, err := st.CreateAuction(ctx, bidgate.NewAuction{SellerID: testSeller, Title: "new", StartPrice: decimal.NewFromInt(int64(50 + i%400)),
					MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour + time.Duration(i*13%300)*time.Minute), ExtendWindow: time.Minute, ExtendBy: time.Minute})
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			g.Go(func() error { // creates, before and after the cursor, at its own pace
				for i := 0; i < 150 && ctx.Err() == nil; i++ {
					if err := create(ctx, i); err != nil {
						return err
					}
				}
				return nil
			})
			g.Go(func() error { // each round creates one, cancels or closes one, and tells the pager
				for i := 0; ctx.Err() == nil; i++ {
					if err := create(ctx, 1000+i); err != nil {
						return err
					}
					switch id := next(); {
					case id == 0:
					case i%2 == 0:
						if _, _, err := st.CancelCold(ctx, id); err != nil && ctx.Err() == nil {
							return err
						}
					default:
						// Its end comes (the end moved to the past: the test's
						// shortcut through time), then the closer's statement
						// closes it.
						if _, err := db.Exec(ctx, "UPDATE auction SET end_time = clock_timestamp() - interval '1 second' WHERE id = $1", id); err != nil && ctx.Err() == nil {
							return err
						}
						if _, err := st.CloseDueCold(ctx, 10); err != nil && ctx.Err() == nil {
							return err
						}
					}
					select {
					case rounds <- struct{}{}:
					case <-ctx.Done():
					}
				}
				return nil
			})
			var seen []int64
			p := s.list(fmt.Sprintf("/auctions?sort=%s&limit=7", sort))
			for {
				seen = append(seen, p.ids...)
				if p.next == "" {
					break
				}
				<-rounds // the list changes between pages
				p = s.list(fmt.Sprintf("/auctions?sort=%s&limit=7&cursor=%s", sort, p.next))
			}
			stop()
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			after := openIDs(t, db)
			counts := map[int64]int{}
			for _, id := range seen {
				counts[id]++
				if counts[id] > 1 {
					t.Errorf("auction %d listed twice", id)
				}
			}
			stayed := 0
			for id := range before {
				if after[id] {
					stayed++
					if counts[id] == 0 {
						t.Errorf("auction %d was open throughout but never listed", id)
					}
				}
			}
			if stayed == len(before) || stayed < 100 {
				t.Fatalf("%d of %d auctions stayed open: the churn did not happen as planned", stayed, len(before))
			}
		})
	}
}

func openIDs(t testing.TB, db *pgxpool.Pool) map[int64]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT id FROM auction WHERE status = 'OPEN'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestListRefusesForeignCursors(t *testing.T) {
	s, db := startServer(t)
	seed(t, db, testSeller, 5, lot)
	first := s.list("/auctions?limit=2")
	if first.next == "" {
		t.Fatal("no next cursor")
	}
	raw, err := base64.RawURLEncoding.DecodeString(first.next)
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ name, path string }
	add := func(name, path string) { cases = append(cases, struct{ name, path string }{name, path}) }
	for i := range raw {
		flipped := slices.Clone(raw)
		flipped[i] ^= 0x01
		add(fmt.Sprintf("byte %d flipped", i), "/auctions?limit=2&cursor="+base64.RawURLEncoding.EncodeToString(flipped))
	}
	add("truncated", "/auctions?limit=2&cursor="+base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]))
	add("extended", "/auctions?limit=2&cursor="+base64.RawURLEncoding.EncodeToString(append(slices.Clone(raw), 0)))
	add("not base64url", "/auctions?limit=2&cursor="+url.QueryEscape(first.next+"+/"))
	add("padded", "/auctions?limit=2&cursor="+first.next+"%3D")
	add("too long", "/auctions?cursor="+strings.Repeat("A", 600))
	add("another sort", "/auctions?sort=newest&cursor="+first.next)
	add("another status", "/auctions?status=CLOSED&cursor="+first.next)
	add("another filter", "/auctions?q=lot&cursor="+first.next)
	add("another route", "/me/auctions?sort=ending&status=OPEN&cursor="+first.next)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, s.do("GET", c.path, nil, as(t, testSeller, auth.ScopeSell)...), 400, "invalid_cursor")
		})
	}
	// The page size may change between pages.
	if p := s.list("/auctions?limit=3&cursor=" + first.next); len(p.ids) != 3 || p.next != "" {
		t.Fatalf("second page: %v, next %q", p.ids, p.next)
	}
	// Another node of no cluster (no secret) has its own key.
	other, _ := startServer(t)
	wantProblem(t, other.do("GET", "/auctions?limit=2&cursor="+first.next, nil), 400, "invalid_cursor")
}

func TestListSharesCursorsAcrossTheCluster(t *testing.T) {
	secret, previous := []byte("a cluster secret of 32 bytes....."), []byte("the previous secret of 32 bytes..")
	oldNode, db := startGateway(t, Config{ClusterSecret: previous}, shard.Config{RateLimit: -1, PromoteRate: -1})
	seed(t, db, testSeller, 4, lot)
	cursor := oldNode.list("/auctions?limit=1").next
	// A node of the same cluster, after the rotation, still opens it; one of
	// another cluster does not.
	rotated, db2 := startGateway(t, Config{ClusterSecret: secret, ClusterSecretPrevious: previous}, shard.Config{RateLimit: -1, PromoteRate: -1})
	seed(t, db2, testSeller, 4, lot)
	if p := rotated.list("/auctions?limit=1&cursor=" + cursor); len(p.ids) != 1 {
		t.Fatalf("rotated node: %v", p.ids)
	}
	stranger, db3 := startGateway(t, Config{ClusterSecret: secret}, shard.Config{RateLimit: -1, PromoteRate: -1})
	seed(t, db3, testSeller, 4, lot)
	wantProblem(t, stranger.do("GET", "/auctions?limit=1&cursor="+cursor, nil), 400, "invalid_cursor")
}

func TestMyAuctions(t *testing.T) {
	s, _ := startServer(t)
	const (
		seller  int64 = testSeller
		other   int64 = 9_000_021
		bidder1 int64 = 9_000_031
		bidder2 int64 = 9_000_032
	)
	mine := s.createAuctionAs(seller, validAuction())
	theirs := s.createAuctionAs(other, validAuction())
	cancelled := s.createAuctionAs(seller, validAuction())
	if r := s.do("POST", fmt.Sprintf("/auctions/%d/cancel", cancelled), nil, as(t, seller, auth.ScopeSell)...); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	for i, b := range []int64{bidder1, bidder2, bidder1} {
		if r := s.bid(b, mine, uuid.NewString(), map[string]any{"amount": fmt.Sprint(1010 + 10*i)}); r.status != 201 {
			t.Fatalf("bid: %d %s", r.status, r.raw)
		}
	}
	if r := s.bid(bidder2, theirs, uuid.NewString(), map[string]any{"amount": "1010"}); r.status != 201 {
		t.Fatalf("bid: %d %s", r.status, r.raw)
	}

	p := s.list("/me/auctions", as(t, seller, auth.ScopeSell)...)
	if !slices.Equal(p.ids, []int64{cancelled, mine}) {
		t.Fatalf("seller's auctions %v, want %v (newest first, every status)", p.ids, []int64{cancelled, mine})
	}
	counts := map[float64]float64{}
	for _, it := range p.raw {
		m := it.(map[string]any)
		counts[m["id"].(float64)] = m["bidCount"].(float64)
		if m["sellerId"].(float64) != float64(seller) {
			t.Fatalf("another seller's auction listed: %v", m)
		}
	}
	if counts[float64(mine)] != 3 || counts[float64(cancelled)] != 0 {
		t.Fatalf("bid counts %v", counts)
	}
	if p := s.list("/me/auctions?status=OPEN", as(t, seller, auth.ScopeSell)...); !slices.Equal(p.ids, []int64{mine}) {
		t.Fatalf("open ones: %v", p.ids)
	}
	if p := s.list("/me/auctions", as(t, other, auth.ScopeSell)...); !slices.Equal(p.ids, []int64{theirs}) {
		t.Fatalf("other seller's: %v", p.ids)
	}
	if p := s.list(fmt.Sprintf("/me/auctions?sellerId=%d", seller), as(t, seller, auth.ScopeSell)...); !slices.Equal(p.ids, []int64{cancelled, mine}) {
		t.Fatalf("naming oneself: %v", p.ids)
	}
	if p := s.list("/me/auctions", as(t, bidder1, auth.ScopeSell)...); len(p.ids) != 0 || p.next != "" {
		t.Fatalf("a seller of nothing: %v", p)
	}
	wantProblem(t, s.do("GET", "/me/auctions", nil), 401, "unauthenticated")
	wantProblem(t, s.do("GET", "/me/auctions", nil, "Authorization", "Bearer not-a-token"), 401, "unauthenticated")
	wantProblem(t, s.do("GET", "/me/auctions", nil, as(t, seller, auth.ScopeBid)...), 403, "forbidden")
	wantProblem(t, s.do("GET", fmt.Sprintf("/me/auctions?sellerId=%d", other), nil, as(t, seller, auth.ScopeSell)...), 403, "subject_mismatch")
	// A cursor of one seller's list does not open another's.
	s.createAuctionAs(other, validAuction())
	op := s.list("/me/auctions?limit=1", as(t, other, auth.ScopeSell)...)
	wantProblem(t, s.do("GET", "/me/auctions?limit=1&cursor="+op.next, nil, as(t, seller, auth.ScopeSell)...), 400, "invalid_cursor")
}

// TestListShowsHotAuctionsLive: a hot auction's row lags Redis until the
// persister writes its bids (no persister runs here); the list shows the
// live price and bid count, in the database's order.
func TestListShowsHotAuctionsLive(t *testing.T) {
	s, _ := startServer(t)
	cold := s.createAuction(with(validAuction(), "startPrice", "2000"))
	hot := s.createAuction(with(validAuction(), "hot", true))
	if r := s.bid(9_000_041, hot, uuid.NewString(), map[string]any{"amount": "5000"}); r.status != 201 {
		t.Fatalf("hot bid: %d %s", r.status, r.raw)
	}
	p := s.list("/auctions?sort=price_desc")
	if !slices.Equal(p.ids, []int64{cold, hot}) {
		t.Fatalf("order %v, want the database's (%d at 2000 before %d at 1000 in its row)", p.ids, cold, hot)
	}
	live := p.raw[1].(map[string]any)
	if _, leaks := live["leaderId"]; leaks || live["currentPrice"] != "5000.00" || live["bidCount"] != float64(1) || live["leader"] != "Bidder 1" {
		t.Fatalf("hot auction shown as %v, want its live state with the leader by alias only", live)
	}
	// The next page starts after the row's position, not the live one.
	first := s.list("/auctions?sort=price_desc&limit=1")
	if rest := s.list("/auctions?sort=price_desc&limit=1&cursor=" + first.next); !slices.Equal(rest.ids, []int64{hot}) {
		t.Fatalf("second page %v", rest.ids)
	}
}
