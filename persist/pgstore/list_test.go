package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// A search walks the list's order for 200 entries per item of the page,
// then asks the title index for the rest: matches past the walk, in
// any order, come back in order and page without a gap, the same as matches
// within it.
func TestSearchFindsMatchesPastTheWalk(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	const lots = 500
	rare := map[int]bool{7: true, 300: true, 480: true}
	ids := make([]int64, lots)
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range lots {
		title := fmt.Sprintf("plain lot %d", i)
		if rare[i] {
			title = fmt.Sprintf("rare vase %d", i)
		}
		a, err := s.CreateAuction(ctx, bidgate.NewAuction{SellerID: historySeller, Title: title,
			StartPrice: decimal.NewFromInt(int64(100 + i)), MinIncrement: decimal.NewFromInt(1),
			EndTime: end.Add(time.Duration(i) * time.Minute), ExtendWindow: time.Minute, ExtendBy: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = a.ID
	}
	ascending := []int64{ids[7], ids[300], ids[480]}
	descending := []int64{ids[480], ids[300], ids[7]}
	for _, tc := range []struct {
		sort  bidgate.ListSort
		q     string
		limit int
		want  []int64
	}{
		{bidgate.SortEnding, "rare", 1, ascending}, // a walk of 200 entries: the second match lies past it
		{bidgate.SortEnding, "rare", 2, ascending},
		{bidgate.SortEnding, "rare vase", 50, ascending},
		{bidgate.SortNewest, "rare", 1, descending},
		{bidgate.SortPriceDesc, "rare", 1, descending},
		{bidgate.SortPriceDesc, "RARE", 2, descending},
		{bidgate.SortEnding, "plain", 2, ids[:6]},
		{bidgate.SortEnding, "nothing", 1, nil},
		{bidgate.SortEnding, "rare -vase", 1, nil},
	} {
		t.Run(fmt.Sprintf("%s/%s/%d", tc.sort, tc.q, tc.limit), func(t *testing.T) {
			var got []int64
			q := bidgate.ListQuery{Filter: bidgate.ListFilter{Status: bidgate.StatusOpen, Query: tc.q}, Sort: tc.sort, Limit: tc.limit}
			for page := 0; page < 3; page++ {
				list, err := s.ListAuctions(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(list) > tc.limit {
					t.Fatalf("a page of %d items, limit %d", len(list), tc.limit)
				}
				for _, a := range list {
					got = append(got, a.ID)
				}
				if len(list) < tc.limit {
					break
				}
				q.After = tc.sort.KeyOf(list[len(list)-1])
			}
			if len(tc.want) < len(got) {
				got = got[:len(tc.want)]
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ids %v, want %v", got, tc.want)
			}
		})
	}
}
