package bench

import (
	"math/rand/v2"
	"testing"
)

// TestDrawMix: the flash sale's bids on one auction are straight or proxy
// (one of the two terms each), rise two increments a bid, about
// ProxyShare are proxy bids, and RepeatShare come back from the bidder of
// the latest proxy bid, never above the bucket a bidder is allowed.
func TestDrawMix(t *testing.T) {
	c := DefaultFlashSale()
	if err := c.normalize(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var next int64
	bidder := func() int64 { next++; return 1_000_000 + next }
	const n = 30_000
	var d auctionDraw
	proxies, repeats, run, longest := 0, 0, 0, 0
	var last int64
	for k := int64(1); k <= n; k++ {
		var j Job
		lastProxy := d.lastProxy
		d.draw(rng, c, coldStartCents, bidder, &j)
		if (j.Amount == "") == (j.MaxAmount == "") {
			t.Fatalf("bid %d: amount %q, maxAmount %q: want exactly one", k, j.Amount, j.MaxAmount)
		}
		floor := coldStartCents + 2*incCents*k
		if v := money(j.Amount + j.MaxAmount).Shift(2).IntPart(); v < floor {
			t.Fatalf("bid %d at %d cents, under the stream's %d", k, v, floor)
		}
		if j.MaxAmount != "" {
			proxies++
		}
		if j.BidderID == lastProxy {
			repeats++
		}
		if j.BidderID == last {
			run++
		} else {
			run = 1
		}
		longest, last = max(longest, run), j.BidderID
	}
	if share := float64(proxies) / n; share < c.ProxyShare-0.03 || share > c.ProxyShare+0.1 {
		t.Errorf("%.3f proxy bids, want about %.3f", share, c.ProxyShare)
	}
	if share := float64(repeats) / n; share < c.RepeatShare/2 || share > c.RepeatShare*2 {
		t.Errorf("%.3f repeated bidders, want about %.3f", share, c.RepeatShare)
	}
	// bidgate's default bucket is 10 bids: a bidder never sends that many
	// in a row.
	if longest >= 10 {
		t.Errorf("one bidder sent %d bids in a row", longest)
	}
}

// TestEvery: how often an auction gets a feature of a given share.
func TestEvery(t *testing.T) {
	for share, want := range map[float64]int{0: 0, -1: 0, 1: 1, 0.5: 2, 0.2: 5, 0.1: 10, 1.0 / 3: 3, 0.0001: 10_000} {
		if got := every(share); got != want {
			t.Errorf("every(%v) = %d, want %d", share, got, want)
		}
	}
}
