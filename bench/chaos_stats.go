package bench

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Loss is what became of a run's acknowledged bids, each kind counted on
// its own. The audit fails on every one of them but lumps them together
// (checkPersisted counts a lost bid and an altered one alike;
// checkIdempotency a duplicate and a missing row alike); the fault harness
// (package chaos) reports them apart.
type Loss struct {
	Acknowledged int // 201 answers
	Missing      int // 201s whose auction and Idempotency-Key have no row in bid
	Altered      int // 201s whose row has another bidder, kind, amount or maximum, or seq
	// DuplicateKeys are Idempotency-Keys that yielded more than one bid:
	// two rows, two 201s, or answers (201/200) naming different seqs.
	DuplicateKeys int
}

// CountLoss reads the bid rows of every auction res's requests went to and
// counts what became of the acknowledged bids. Call it after the run (its
// audit has waited for the pipeline); it reads the tables as they are now.
func (e *Env) CountLoss(ctx context.Context, res *Result) (Loss, error) {
	type key struct {
		auction int64
		key     uuid.UUID
	}
	var l Loss
	auctions := map[int64]bool{}
	for i := range res.records {
		auctions[res.records[i].AuctionID] = true
	}
	ids := make([]int64, 0, len(auctions))
	for id := range auctions {
		ids = append(ids, id)
	}
	rows, err := e.db.Query(ctx, `SELECT auction_id, request_id, bidder_id, amount::text, kind, COALESCE(max_amount::text, ''), seq
  FROM bid WHERE auction_id = ANY($1)`, ids)
	if err != nil {
		return l, fmt.Errorf("read bids: %w", err)
	}
	stored := map[key][]BidRow{}
	var k key
	var r BidRow
	if _, err := pgx.ForEachRow(rows, []any{&k.auction, &k.key, &r.BidderID, &r.Amount, &r.Kind, &r.MaxAmount, &r.Seq}, func() error {
		stored[k] = append(stored[k], r)
		return nil
	}); err != nil {
		return l, fmt.Errorf("read bids: %w", err)
	}
	type answers struct {
		created int
		seqs    map[int64]bool
	}
	seen := map[key]*answers{}
	for i := range res.records {
		rec := &res.records[i]
		if rec.Outcome != Created && rec.Outcome != Replayed {
			continue
		}
		k := key{rec.AuctionID, rec.Key}
		a := seen[k]
		if a == nil {
			a = &answers{seqs: map[int64]bool{}}
			seen[k] = a
		}
		a.seqs[rec.Seq] = true
		if rec.Outcome != Created {
			continue
		}
		a.created++
		l.Acknowledged++
		got := stored[k]
		switch {
		case len(got) == 0:
			l.Missing++
		case !rec.matches(got[0]):
			l.Altered++
		}
	}
	dup := map[key]bool{}
	for k, rs := range stored {
		if len(rs) > 1 {
			dup[k] = true
		}
	}
	for k, a := range seen {
		if a.created > 1 || len(a.seqs) > 1 {
			dup[k] = true
		}
	}
	l.DuplicateKeys = len(dup)
	return l, nil
}
