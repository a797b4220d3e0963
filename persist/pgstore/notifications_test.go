package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// storeNotices inserts notices in order, as the notifier would store
// them: n follows the order.
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

// outbid is user's notice that bid seq of auction took the lead from them.
func outbid(user, auction, seq int64) bidgate.Notice {
	return bidgate.Notice{ID: bidgate.NoticeID(bidgate.NoticeOutbid, auction, user, seq), Type: bidgate.NoticeOutbid,
		UserID: user, AuctionID: auction, Title: "lot", Price: fmt.Sprintf("%d.00", 100+seq), MaxAmount: "150.00",
		At: time.Date(2030, 1, 2, 3, 4, 5, int(seq)*1000, time.UTC)}
}

// ids is a page's notice ids, newest first.
func ids(p bidgate.NotificationsPage) string {
	var b strings.Builder
	for _, n := range p.Items {
		b.WriteString(n.ID + " ")
	}
	return b.String()
}

func TestNotificationsPages(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	const me, other = 11, 12
	storeNotices(t, db, outbid(me, 1, 2), outbid(other, 1, 3), outbid(me, 1, 4), outbid(me, 2, 5), outbid(other, 2, 6), outbid(me, 2, 7))

	tests := []struct {
		name       string
		q          bidgate.NotificationsQuery
		want, next string
		wantErr    error
		unread     int64
	}{
		{name: "all", q: bidgate.NotificationsQuery{Limit: 10}, want: "outbid-2-7 outbid-2-5 outbid-1-4 outbid-1-2 ", unread: 4},
		{name: "first page", q: bidgate.NotificationsQuery{Limit: 2}, want: "outbid-2-7 outbid-2-5 ", next: "outbid-2-5", unread: 4},
		{name: "second page", q: bidgate.NotificationsQuery{Limit: 2, Before: "outbid-2-5"}, want: "outbid-1-4 outbid-1-2 ", unread: 4},
		{name: "a page that ends exactly", q: bidgate.NotificationsQuery{Limit: 4}, want: "outbid-2-7 outbid-2-5 outbid-1-4 outbid-1-2 ", unread: 4},
		{name: "after", q: bidgate.NotificationsQuery{Limit: 10, After: "outbid-1-4"}, want: "outbid-2-7 outbid-2-5 ", unread: 4},
		{name: "after, more than a page", q: bidgate.NotificationsQuery{Limit: 1, After: "outbid-1-2"}, want: "outbid-2-7 ", next: "outbid-2-7", unread: 4},
		{name: "after the newest", q: bidgate.NotificationsQuery{Limit: 10, After: "outbid-2-7"}, unread: 4},
		{name: "before the oldest", q: bidgate.NotificationsQuery{Limit: 10, Before: "outbid-1-2"}, unread: 4},
		{name: "after another user's", q: bidgate.NotificationsQuery{Limit: 10, After: "outbid-1-3"}, wantErr: bidgate.ErrNoticeNotFound},
		{name: "before another user's", q: bidgate.NotificationsQuery{Limit: 10, Before: "outbid-2-6"}, wantErr: bidgate.ErrNoticeNotFound},
		{name: "before nobody's", q: bidgate.NotificationsQuery{Limit: 10, Before: "won-99"}, wantErr: bidgate.ErrNoticeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.UserID = me
			p, err := s.Notifications(ctx, tc.q)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || len(p.Items) != 0 {
					t.Fatalf("got %q, %v; want %v", ids(p), err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ids(p) != tc.want || p.Next != tc.next || p.Unread != tc.unread {
				t.Fatalf("got %q next %q unread %d; want %q next %q unread %d", ids(p), p.Next, p.Unread, tc.want, tc.next, tc.unread)
			}
			for _, n := range p.Items {
				if err := n.Validate(); err != nil || n.UserID != me {
					t.Fatalf("notice %+v: %v", n, err)
				}
			}
		})
	}

	// Read whole, a notice is as it was stored.
	p, err := s.Notifications(ctx, bidgate.NotificationsQuery{UserID: me, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := outbid(me, 2, 7); len(p.Items) != 1 || !p.Items[0].At.Equal(want.At) {
		t.Fatalf("got %+v, want %+v", p.Items, want)
	} else if got := p.Items[0]; got.ID != want.ID || got.Type != want.Type || got.AuctionID != want.AuctionID ||
		got.Title != want.Title || got.Price != want.Price || got.MaxAmount != want.MaxAmount {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// The mark rises and never falls; another user's notice marks nothing;
// the count stops at bidgate.MaxUnread.
func TestMarkNotificationsRead(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	const me, other = 21, 22
	storeNotices(t, db, outbid(me, 1, 2), outbid(other, 1, 3), outbid(me, 1, 4), outbid(me, 1, 5))

	unread := func(user int64) int64 {
		t.Helper()
		p, err := s.Notifications(ctx, bidgate.NotificationsQuery{UserID: user, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return p.Unread
	}
	for _, step := range []struct {
		user       int64
		upTo       string
		want       int64
		wantErr    error
		mine, hers int64 // the unread counts after it
	}{
		{user: me, upTo: "outbid-1-3", wantErr: bidgate.ErrNoticeNotFound, mine: 3, hers: 1},
		{user: me, upTo: "won-1", wantErr: bidgate.ErrNoticeNotFound, mine: 3, hers: 1},
		{user: me, upTo: "outbid-1-4", want: 1, mine: 1, hers: 1},
		{user: me, upTo: "outbid-1-2", want: 1, mine: 1, hers: 1}, // older: the mark stays
		{user: other, upTo: "outbid-1-3", want: 0, mine: 1, hers: 0},
		{user: me, upTo: "outbid-1-5", want: 0, mine: 0, hers: 0},
	} {
		got, err := s.MarkNotificationsRead(ctx, step.user, step.upTo)
		if (step.wantErr != nil && !errors.Is(err, step.wantErr)) || (step.wantErr == nil && (err != nil || got != step.want)) {
			t.Fatalf("user %d up to %s: %d, %v; want %d, %v", step.user, step.upTo, got, err, step.want, step.wantErr)
		}
		if m, h := unread(me), unread(other); m != step.mine || h != step.hers {
			t.Fatalf("after user %d up to %s: unread %d and %d, want %d and %d", step.user, step.upTo, m, h, step.mine, step.hers)
		}
	}

	// A user far behind counts to the cap and no further.
	if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
		SELECT 'outbid-2-' || g, $1, 'outbid', 2, 'lot', 100, clock_timestamp() FROM generate_series(1, $2::int) g`,
		me, bidgate.MaxUnread+5); err != nil {
		t.Fatal(err)
	}
	if got := unread(me); got != bidgate.MaxUnread {
		t.Fatalf("unread %d, want the cap %d", got, bidgate.MaxUnread)
	}
	if got, err := s.MarkNotificationsRead(ctx, me, fmt.Sprintf("outbid-2-%d", 5)); err != nil || got != bidgate.MaxUnread {
		t.Fatalf("marked 5 of %d: unread %d, %v; want the cap", bidgate.MaxUnread+5, got, err)
	}
	if got, err := s.MarkNotificationsRead(ctx, me, fmt.Sprintf("outbid-2-%d", 10)); err != nil || got != bidgate.MaxUnread-5 {
		t.Fatalf("marked 10 of %d: unread %d, %v; want %d", bidgate.MaxUnread+5, got, err, bidgate.MaxUnread-5)
	}
}
