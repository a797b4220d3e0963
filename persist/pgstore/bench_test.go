package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	for _, c := range []struct {
		name    string
		outbid  bool
		notices pgstore.OutbidNotices
	}{{"notices=none", false, pgstore.StoreOutbidNotices}, {"notices=stored", true, pgstore.StoreOutbidNotices}, {"notices=queued", true, pgstore.QueueOutbidNotices}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db, _ := testdb.New(b, 2)
			s := &pgstore.Store{DB: db}
			var auctions []int64
			for range 4 {
				a, err := s.CreateAuction(ctx, bidgate.NewAuction{SellerID: 1, Title: "Vintage camera lens kit",
					StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1),
					EndTime: time.Now().Add(time.Hour), ExtendWindow: time.Minute, ExtendBy: time.Minute, Hot: true})
				if err != nil {
					b.Fatal(err)
				}
				auctions = append(auctions, a.ID)
			}
			const perAuction = 12
			seq := map[int64]int64{}
			batch := make([]bidgate.BidAccepted, 0, len(auctions)*perAuction)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				batch = batch[:0]
				now := time.Now().UTC()
				for _, a := range auctions {
					for range perAuction {
						seq[a]++
						n := seq[a]
						bid := bidgate.BidAccepted{AuctionID: a, BidderID: 1000 + n, Amount: strconv.FormatInt(100+n, 10) + ".00",
							RequestID: uuid.NewString(), Seq: n, AcceptedAt: now, EndTime: now.Add(time.Hour), StreamID: strconv.FormatInt(n, 10) + "-0"}
						if c.outbid && n > 1 {
							bid.Outbid, bid.OutbidMax = 999+n, strconv.FormatInt(99+n, 10)+".00"
						}
						batch = append(batch, bid)
					}
				}
				if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
					w, err := pgstore.WriteHotBids(ctx, tx, batch, c.notices)
					if err == nil && w.Inserted != int64(len(batch)) {
						err = fmt.Errorf("%d of %d bids inserted", w.Inserted, len(batch))
					}
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*len(auctions)*perAuction), "µs/bid")
		})
	}
}
