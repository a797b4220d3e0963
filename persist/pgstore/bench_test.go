package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// BenchmarkCompareBids is the persister's and the reconciler's check of a
// batch of 100 hot bids against the bid table: mostly pgx encoding the
// batch's columns (request ids, amounts) on the client, and one index
// look-up per bid on the server.
func BenchmarkCompareBids(b *testing.B) {
	db, _ := testdb.New(b, 2)
	now := time.Now().UTC()
	bids := make([]bidgate.BidAccepted, 100)
	for i := range bids {
		bids[i] = bidgate.BidAccepted{AuctionID: 1, BidderID: int64(i + 1), Amount: strconv.Itoa(200+i) + ".50",
			Kind: bidgate.KindProxy, MaxAmount: strconv.Itoa(300+i) + ".00", RequestID: uuid.NewString(),
			Seq: int64(i + 1), AcceptedAt: now, EndTime: now.Add(time.Hour), StreamID: strconv.Itoa(i+1) + "-0"}
	}
	b.ReportAllocs()
	for b.Loop() {
		rows, err := pgstore.CompareBids(context.Background(), db, bids)
		if err != nil {
			b.Fatal(err)
		}
		if rows[0] != pgstore.RowAbsent {
			b.Fatalf("row 1: %v, want absent", rows[0])
		}
	}
}

// BenchmarkWriteHotBids is the persister's transaction for a batch of 48
// new hot bids over 4 auctions (lock the rows, insert the bids, advance the
// persisted positions), each bid taking the lead from the one before: with
// its outbid notice stored (the persister's, as in a flash sale) or queued
// in the outbox (the closer's), or without. It reports the transaction's
// wall time per bid, client and server together on one connection.
func BenchmarkWriteHotBids(b *testing.B) {
	for _, c := range noticeCases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db, _ := testdb.New(b, 2)
			w := newHotWriter(b, db, c.outbid)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				w.write(ctx, c.notices)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*auctionsPerWriter*bidsPerAuction), "µs/bid")
		})
	}
}

// BenchmarkWriteHotBidsConcurrently is BenchmarkWriteHotBids with 4
// writers at once, each on auctions of its own, as persisters on several
// nodes write: stored notices are numbered under one lock held to the
// commit, so their writers commit one at a time, where the others' commits
// may overlap. It reports wall time per bid of all writers together.
func BenchmarkWriteHotBidsConcurrently(b *testing.B) {
	const writers = 4
	for _, c := range noticeCases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db, _ := testdb.New(b, writers+1)
			ws := make(chan *hotWriter, writers)
			for range writers {
				ws <- newHotWriter(b, db, c.outbid)
			}
			b.SetParallelism(writers) // at least writers goroutines; each takes one writer
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				w := <-ws
				defer func() { ws <- w }()
				for pb.Next() {
					w.write(ctx, c.notices)
				}
			})
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*writers*auctionsPerWriter*bidsPerAuction), "µs/bid")
		})
	}
}

var noticeCases = []struct {
	name    string
	outbid  bool
	notices pgstore.OutbidNotices
}{{"notices=none", false, pgstore.StoreOutbidNotices}, {"notices=stored", true, pgstore.StoreOutbidNotices}, {"notices=queued", true, pgstore.QueueOutbidNotices}}

// Each writer's batch: bidsPerAuction new bids on each of its auctions.
const auctionsPerWriter, bidsPerAuction = 4, 12

// hotWriter writes batches of new bids on hot auctions of its own.
type hotWriter struct {
	b        testing.TB
	db       *pgxpool.Pool
	auctions []int64
	seq      map[int64]int64
	outbid   bool // each bid after the first outbids the one before
	batch    []bidgate.BidAccepted
}

func newHotWriter(b testing.TB, db *pgxpool.Pool, outbid bool) *hotWriter {
	s := &pgstore.Store{DB: db}
	w := &hotWriter{b: b, db: db, seq: map[int64]int64{}, outbid: outbid}
	for range auctionsPerWriter {
		a, err := s.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 1, Title: "Vintage camera lens kit",
			StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1),
			EndTime: time.Now().Add(time.Hour), ExtendWindow: time.Minute, ExtendBy: time.Minute, Hot: true})
		if err != nil {
			b.Fatal(err)
		}
		w.auctions = append(w.auctions, a.ID)
	}
	return w
}

// write commits the next batch in a transaction of its own.
func (w *hotWriter) write(ctx context.Context, notices pgstore.OutbidNotices) {
	w.batch = w.batch[:0]
	now := time.Now().UTC()
	for _, a := range w.auctions {
		for range bidsPerAuction {
			w.seq[a]++
			n := w.seq[a]
			bid := bidgate.BidAccepted{AuctionID: a, BidderID: 1000 + n, Amount: strconv.FormatInt(100+n, 10) + ".00",
				RequestID: uuid.NewString(), Seq: n, AcceptedAt: now, EndTime: now.Add(time.Hour), StreamID: strconv.FormatInt(n, 10) + "-0"}
			if w.outbid && n > 1 {
				bid.Outbid, bid.OutbidMax = 999+n, strconv.FormatInt(99+n, 10)+".00"
			}
			w.batch = append(w.batch, bid)
		}
	}
	if err := pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		res, err := pgstore.WriteHotBids(ctx, tx, w.batch, notices)
		if err == nil && res.Inserted != int64(len(w.batch)) {
			err = fmt.Errorf("%d of %d bids inserted", res.Inserted, len(w.batch))
		}
		return err
	}); err != nil {
		w.b.Error(err) // from a parallel goroutine: Fatal is not allowed there
	}
}
