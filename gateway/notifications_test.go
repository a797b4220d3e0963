package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/shard"
)

// storeNotices inserts notices in order, as the notifier stores them (n
// follows the order).
func storeNotices(t *testing.T, db *pgxpool.Pool, notices ...bidgate.Notice) {
	t.Helper()
	for _, n := range notices {
		_, err := db.Exec(context.Background(), `INSERT INTO notification (id, user_id, type, auction_id, title, price, max_amount, at)
			VALUES ($1, $2, $3, $4, $5, $6::numeric, NULLIF($7, '')::numeric, $8)`,
			n.ID, n.UserID, string(n.Type), n.AuctionID, n.Title, n.Price, n.MaxAmount, n.At)
		if err != nil {
			t.Fatalf("store notice %s: %v", n.ID, err)
		}
	}
}

// notice is user's notice of type kind about auction, caused by its bid
// seq (outbid) or its close; max is the user's own maximum ("" for none).
func notice(kind bidgate.NoticeType, user, auction, seq int64, price, max string) bidgate.Notice {
	return bidgate.Notice{ID: bidgate.NoticeID(kind, auction, user, seq), Type: kind, UserID: user, AuctionID: auction,
		Title: fmt.Sprintf("Lot %d", auction), Price: price, MaxAmount: max,
		At: time.Date(2030, 1, 2, 3, 4, int(auction%60), int(seq)*1000+123, time.UTC).Truncate(time.Microsecond)}
}

// The notices of the tests, in the order they are stored: two auctions of
// testSeller, alice and bob bidding on both; the first sold to alice, the
// second below its reserve.
func storyNotices() []bidgate.Notice {
	return []bidgate.Notice{
		notice(bidgate.NoticeOutbid, bob, 701, 2, "1100.00", ""),
		notice(bidgate.NoticeOutbid, alice, 701, 3, "1210.00", "1200.00"),
		notice(bidgate.NoticeOutbid, alice, 702, 2, "500.00", ""),
		notice(bidgate.NoticeOutbid, bob, 701, 4, "1310.00", "1300.00"),
		notice(bidgate.NoticeWon, alice, 701, 0, "1310.00", "1500.00"),
		notice(bidgate.NoticeLost, bob, 701, 0, "1310.00", "1300.00"),
		notice(bidgate.NoticeSold, testSeller, 701, 0, "1310.00", ""),
		notice(bidgate.NoticeLost, alice, 702, 0, "510.00", ""),
		notice(bidgate.NoticeLost, bob, 702, 0, "510.00", "510.00"),
		notice(bidgate.NoticeUnsold, testSeller, 702, 0, "510.00", ""),
		notice(bidgate.NoticeOutbid, alice, 703, 7, "80.00", ""),
	}
}

// newestFirst is user's notices of all, newest first.
func newestFirst(all []bidgate.Notice, user int64) []bidgate.Notice {
	var mine []bidgate.Notice
	for _, n := range slices.Backward(all) {
		if n.UserID == user {
			mine = append(mine, n)
		}
	}
	return mine
}

func noticeIDs(ns []bidgate.Notice) []string {
	ids := make([]string, 0, len(ns))
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	return ids
}

// notifications reads one page of GET /me/notifications with header,
// which must answer 200, privately.
func (s *testServer) notifications(query string, header []string) response {
	s.t.Helper()
	r := s.do("GET", "/me/notifications"+query, nil, header...)
	if r.status != 200 {
		s.t.Fatalf("GET /me/notifications%s: %d %s", query, r.status, r.raw)
	}
	if cc := r.header.Get("Cache-Control"); cc != "private, no-store" {
		s.t.Fatalf("GET /me/notifications%s: Cache-Control %q", query, cc)
	}
	return r
}

// pageIDs is a page's notice ids and its nextCursor ("" when null).
func pageIDs(r response) ([]string, string) {
	var ids []string
	for _, it := range r.body["items"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	next, _ := r.body["nextCursor"].(string)
	return ids, next
}

// unread is user's unread count.
func (s *testServer) unread(header []string) float64 {
	s.t.Helper()
	return s.notifications("?limit=1", header).body["unread"].(float64)
}

// Three users read their own notices: only theirs, newest first, each as
// stored, in pages of every size without gap or duplicate, with before
// and with after.
func TestNotificationsAreEachUsersOwn(t *testing.T) {
	s, db := startServer(t)
	all := storyNotices()
	storeNotices(t, db, all...)
	users := []struct {
		name   string
		id     int64
		header []string
	}{
		{"seller", testSeller, as(t, testSeller, auth.ScopeSell)},
		{"alice", alice, as(t, alice, auth.ScopeBid)},
		{"bob", bob, as(t, bob, auth.ScopeBid)},
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			want := newestFirst(all, u.id)
			r := s.notifications("?limit=100", u.header)
			if ids, next := pageIDs(r); !slices.Equal(ids, noticeIDs(want)) || next != "" {
				t.Fatalf("got %v next %q, want %v", ids, next, noticeIDs(want))
			}
			if r.body["unread"] != float64(len(want)) {
				t.Fatalf("unread %v, want %d", r.body["unread"], len(want))
			}
			// Each item is the notice as stored, as the topic carries it.
			for i, it := range r.body["items"].([]any) {
				b, err := json.Marshal(want[i])
				if err != nil {
					t.Fatal(err)
				}
				var exp map[string]any
				if err := json.Unmarshal(b, &exp); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(it, exp) {
					t.Fatalf("item %d: %v, want %v", i, it, exp)
				}
			}

			for _, limit := range []int{1, 2, 3, len(want)} {
				var got []string
				query := fmt.Sprintf("?limit=%d", limit)
				for pages := 1; ; pages++ {
					ids, next := pageIDs(s.notifications(query, u.header))
					if len(ids) > limit || (next != "" && (len(ids) != limit || next != ids[len(ids)-1])) {
						t.Fatalf("limit %d, page %d: %v next %q", limit, pages, ids, next)
					}
					got = append(got, ids...)
					if next == "" {
						if want := (len(want) + limit - 1) / limit; pages != want {
							t.Fatalf("limit %d: %d pages, want %d", limit, pages, want)
						}
						break
					}
					query = fmt.Sprintf("?limit=%d&before=%s", limit, url.QueryEscape(next))
				}
				if !slices.Equal(got, noticeIDs(want)) {
					t.Fatalf("limit %d: paged %v, want %v", limit, got, noticeIDs(want))
				}
			}

			// after: only the newer ones; more than a page of them is
			// continued with before down to the after notice.
			for i := range want {
				ids, next := pageIDs(s.notifications("?after="+want[i].ID, u.header))
				if !slices.Equal(ids, noticeIDs(want[:i])) || next != "" {
					t.Fatalf("after %s: %v next %q, want %v", want[i].ID, ids, next, noticeIDs(want[:i]))
				}
			}
			oldest := want[len(want)-1].ID
			ids, next := pageIDs(s.notifications("?limit=1&after="+oldest, u.header))
			if len(want) > 2 && (len(ids) != 1 || ids[0] != want[0].ID || next != want[0].ID) {
				t.Fatalf("after %s, one a page: %v next %q", oldest, ids, next)
			}
		})
	}

	// A notice stored later is what after the newest one returns.
	newest := newestFirst(all, alice)[0].ID
	late := notice(bidgate.NoticeOutbid, alice, 704, 3, "90.00", "85.00")
	storeNotices(t, db, late)
	if ids, next := pageIDs(s.notifications("?after="+newest, users[1].header)); !slices.Equal(ids, []string{late.ID}) || next != "" {
		t.Fatalf("after %s: %v next %q, want only %s", newest, ids, next, late.ID)
	}
	// Either scope reads them.
	both := as(t, alice, auth.ScopeSell, auth.ScopeBid)
	if ids, _ := pageIDs(s.notifications("?limit=1", both)); !slices.Equal(ids, []string{late.ID}) {
		t.Fatalf("with both scopes: %v", ids)
	}
	if ids, _ := pageIDs(s.notifications("?limit=1", as(t, alice, auth.ScopeSell))); !slices.Equal(ids, []string{late.ID}) {
		t.Fatalf("alice with sell: %v", ids)
	}
}

// readMarks is every user's read_upto, as "user:n".
func readMarks(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT user_id || ':' || read_upto FROM notification_read ORDER BY user_id`)
	if err != nil {
		t.Fatal(err)
	}
	marks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(marks, " ")
}

// Nobody reads, pages from or marks another user's notice: the answers
// are those of an id that never existed, and nothing changes.
func TestNotificationsOfOthersAreNobodys(t *testing.T) {
	s, db := startServer(t)
	all := storyNotices()
	storeNotices(t, db, all...)
	users := map[int64][]string{
		testSeller: as(t, testSeller, auth.ScopeSell),
		alice:      as(t, alice, auth.ScopeBid),
		bob:        as(t, bob, auth.ScopeBid),
	}
	// Alice has read some already.
	if r := s.do("POST", "/me/notifications/read", map[string]any{"upTo": newestFirst(all, alice)[2].ID}, users[alice]...); r.status != 200 {
		t.Fatalf("mark: %d %s", r.status, r.raw)
	}
	marks := readMarks(t, db)
	unread := map[int64]float64{}
	for u, h := range users {
		unread[u] = s.unread(h)
	}
	const nobodys = "won-999999"
	for user, header := range users {
		for _, n := range all {
			if n.UserID == user {
				continue
			}
			for _, param := range []string{"after", "before"} {
				r := s.do("GET", "/me/notifications?"+param+"="+n.ID, nil, header...)
				wantProblem(t, r, 400, "invalid_query")
				none := s.do("GET", "/me/notifications?"+param+"="+nobodys, nil, header...)
				if strings.ReplaceAll(r.raw, n.ID, nobodys) != none.raw || !strings.HasPrefix(r.body["detail"].(string), param+":") {
					t.Fatalf("user %d, %s another's %s: %s; for nobody's: %s", user, param, n.ID, r.raw, none.raw)
				}
				if strings.Contains(strings.ReplaceAll(r.raw, n.ID, ""), fmt.Sprint(n.UserID)) {
					t.Fatalf("user %d, %s another's %s: the answer names its user: %s", user, param, n.ID, r.raw)
				}
			}
			r := s.do("POST", "/me/notifications/read", map[string]any{"upTo": n.ID}, header...)
			wantProblem(t, r, 404, "notice_not_found")
			none := s.do("POST", "/me/notifications/read", map[string]any{"upTo": nobodys}, header...)
			if r.raw != none.raw {
				t.Fatalf("user %d marking another's %s: %s; nobody's: %s", user, n.ID, r.raw, none.raw)
			}
		}
	}
	if got := readMarks(t, db); got != marks {
		t.Fatalf("read marks %q, were %q", got, marks)
	}
	for u, h := range users {
		if got := s.unread(h); got != unread[u] {
			t.Fatalf("user %d: unread %v, was %v", u, got, unread[u])
		}
	}
}

// Marking read lowers the count to what was stored after the mark, never
// raises it, and is each user's own.
func TestMarkNotificationsRead(t *testing.T) {
	s, db := startServer(t)
	all := storyNotices()
	storeNotices(t, db, all...)
	mine, aliceH, bobH := newestFirst(all, alice), as(t, alice, auth.ScopeBid), as(t, bob, auth.ScopeBid)
	bobs := float64(len(newestFirst(all, bob)))
	mark := func(upTo string, header []string) float64 {
		t.Helper()
		r := s.do("POST", "/me/notifications/read", map[string]any{"upTo": upTo}, header...)
		if r.status != 200 || r.header.Get("Cache-Control") != "private, no-store" {
			t.Fatalf("mark up to %s: %d %s %q", upTo, r.status, r.raw, r.header.Get("Cache-Control"))
		}
		return r.body["unread"].(float64)
	}
	if got := s.unread(aliceH); got != float64(len(mine)) {
		t.Fatalf("unread %v before any mark, want %d", got, len(mine))
	}
	for _, step := range []struct {
		upTo string
		want float64
	}{
		{mine[2].ID, 2},
		{mine[len(mine)-1].ID, 2}, // older: the count never rises
		{mine[2].ID, 2},           // again
		{mine[1].ID, 1},
		{mine[3].ID, 1},
		{mine[0].ID, 0},
	} {
		if got := mark(step.upTo, aliceH); got != step.want {
			t.Fatalf("up to %s: unread %v, want %v", step.upTo, got, step.want)
		}
		if got := s.unread(aliceH); got != step.want {
			t.Fatalf("after up to %s: GET says unread %v, want %v", step.upTo, got, step.want)
		}
		if got := s.unread(bobH); got != bobs {
			t.Fatalf("after alice's mark up to %s: bob's unread %v, want %v", step.upTo, got, bobs)
		}
	}
	// A new notice is unread; the list still has every one.
	late := notice(bidgate.NoticeOutbid, alice, 705, 9, "95.00", "")
	storeNotices(t, db, late)
	if got := s.unread(aliceH); got != 1 {
		t.Fatalf("after a new notice: unread %v, want 1", got)
	}
	if ids, _ := pageIDs(s.notifications("", aliceH)); len(ids) != len(mine)+1 || ids[0] != late.ID {
		t.Fatalf("list after marks: %v", ids)
	}
	// With a userId that is the token's subject, the same.
	r := s.do("POST", "/me/notifications/read", map[string]any{"upTo": late.ID, "userId": alice}, aliceH...)
	if r.status != 200 || r.body["unread"] != float64(0) {
		t.Fatalf("mark naming oneself: %d %s", r.status, r.raw)
	}
}

func TestNotificationsRefusals(t *testing.T) {
	s, db := startServer(t)
	all := storyNotices()
	storeNotices(t, db, all...)
	mine := newestFirst(all, alice)
	header := as(t, alice, auth.ScopeBid)
	marks := readMarks(t, db)

	gets := []struct {
		name, query, names string
	}{
		{"unknown parameter", "?cursor=abc", "cursor"},
		{"limit 0", "?limit=0", "limit"},
		{"limit 101", "?limit=101", "limit"},
		{"limit abc", "?limit=abc", "limit"},
		{"limit not canonical", "?limit=05", "limit"},
		{"limit twice", "?limit=1&limit=2", "limit"},
		{"after malformed", "?after=outbid-01-2", "after"},
		{"after of no type", "?after=bid-1-2", "after"},
		{"after empty", "?after=", "after"},
		{"before malformed", "?before=won-", "before"},
		{"before twice", "?before=" + mine[0].ID + "&before=" + mine[1].ID, "before"},
		{"after and before", "?after=" + mine[2].ID + "&before=" + mine[0].ID, "after and before"},
		{"userId with a token", "?userId=5000001", "userId"},
	}
	for _, tc := range gets {
		t.Run("GET "+tc.name, func(t *testing.T) {
			r := s.do("GET", "/me/notifications"+tc.query, nil, header...)
			wantProblem(t, r, 400, "invalid_query")
			if !strings.Contains(r.body["detail"].(string), tc.names) {
				t.Fatalf("detail %q does not name %q", r.body["detail"], tc.names)
			}
		})
	}

	posts := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no body", "", 400, "malformed_json"},
		{"not JSON", "{", 400, "malformed_json"},
		{"an array", `["` + mine[0].ID + `"]`, 400, "malformed_json"},
		{"an unknown member", map[string]any{"upTo": mine[0].ID, "all": true}, 400, "malformed_json"},
		{"a member twice", `{"upTo":"` + mine[1].ID + `","upTo":"` + mine[0].ID + `"}`, 400, "malformed_json"},
		{"a member in another case", map[string]any{"UpTo": mine[0].ID}, 400, "malformed_json"},
		{"upTo a number", map[string]any{"upTo": 7}, 400, "malformed_json"},
		{"no upTo", map[string]any{}, 400, "invalid_notice_id"},
		{"upTo null", `{"upTo":null}`, 400, "invalid_notice_id"},
		{"upTo malformed", map[string]any{"upTo": "won-0"}, 400, "invalid_notice_id"},
		{"upTo too long", map[string]any{"upTo": "won-" + strings.Repeat("9", 20)}, 400, "invalid_notice_id"},
		{"userId of another", map[string]any{"upTo": mine[0].ID, "userId": bob}, 403, "subject_mismatch"},
		{"userId zero", map[string]any{"upTo": mine[0].ID, "userId": 0}, 400, "invalid_user_id"},
	}
	for _, tc := range posts {
		t.Run("POST "+tc.name, func(t *testing.T) {
			wantProblem(t, s.do("POST", "/me/notifications/read", tc.body, header...), tc.status, tc.code)
		})
	}
	if got := readMarks(t, db); got != marks {
		t.Fatalf("read marks %q after refusals, were %q", got, marks)
	}

	// Who may: a token with bid or sell; nobody without one.
	for _, route := range []struct{ method, path string }{{"GET", "/me/notifications"}, {"POST", "/me/notifications/read"}} {
		body := map[string]any{"upTo": mine[0].ID}
		wantProblem(t, s.do(route.method, route.path, body), 401, "unauthenticated")
		wantProblem(t, s.do(route.method, route.path, body, "Authorization", "Bearer not-a-token"), 401, "unauthenticated")
		r := s.do(route.method, route.path, body, as(t, alice, auth.ScopeOperator)...)
		wantProblem(t, r, 403, "forbidden")
		if got := r.header.Get("WWW-Authenticate"); got != `Bearer realm="bidgate", error="insufficient_scope", scope="bid sell"` {
			t.Fatalf("%s %s: WWW-Authenticate %q", route.method, route.path, got)
		}
		wantProblem(t, s.do(route.method, route.path, body, as(t, alice)...), 403, "forbidden")
	}
	if got := readMarks(t, db); got != marks {
		t.Fatalf("read marks %q after refusals, were %q", got, marks)
	}
}

// With authentication off (development), the query's and the body's
// userId name the user, and are required.
func TestNotificationsAuthOff(t *testing.T) {
	s, db := startGateway(t, Config{AuthOff: true}, shard.Config{RateLimit: -1, PromoteRate: -1})
	all := storyNotices()
	storeNotices(t, db, all...)
	mine := newestFirst(all, bob)
	wantProblem(t, s.do("GET", "/me/notifications", nil), 400, "invalid_query")
	if ids, _ := pageIDs(s.notifications(fmt.Sprintf("?userId=%d", bob), nil)); !slices.Equal(ids, noticeIDs(mine)) {
		t.Fatalf("bob's: %v, want %v", ids, noticeIDs(mine))
	}
	wantProblem(t, s.do("POST", "/me/notifications/read", map[string]any{"upTo": mine[0].ID}), 400, "invalid_user_id")
	wantProblem(t, s.do("POST", "/me/notifications/read", map[string]any{"upTo": mine[0].ID, "userId": alice}), 404, "notice_not_found")
	if r := s.do("POST", "/me/notifications/read", map[string]any{"upTo": mine[1].ID, "userId": bob}); r.status != 200 || r.body["unread"] != float64(1) {
		t.Fatalf("bob's mark: %d %s", r.status, r.raw)
	}
}
