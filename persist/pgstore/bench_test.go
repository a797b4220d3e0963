package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

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
