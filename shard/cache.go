package shard

import (
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
)

// priceCache is a node's recent view of auction prices, refreshed from every
// bid result. Prices only rise and an ended auction stays ended, so a cached
// entry is a lower bound that may refuse a bid but never accept one.
type priceCache struct {
	maxAge time.Duration

	mu      sync.Mutex
	entries map[int64]cacheEntry
	writes  int
}

type cacheEntry struct {
	seller     int64 // 0: unknown
	price, inc decimal.Decimal
	closed     bool
	at         time.Time
}

func newPriceCache(maxAge time.Duration) *priceCache {
	return &priceCache{maxAge: maxAge, entries: make(map[int64]cacheEntry)}
}

// update records what a store just said about an auction.
func (c *priceCache) update(auctionID, seller int64, price, inc decimal.Decimal, closed bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[auctionID]; ok && !closed && (old.closed || old.price.GreaterThan(price)) {
		// An older answer raced this one: keep the higher bound.
		price, closed = old.price, old.closed
	}
	c.entries[auctionID] = cacheEntry{seller: seller, price: price, inc: inc, closed: closed, at: now}
	if c.writes++; c.writes%4096 == 0 {
		for id, e := range c.entries {
			if now.Sub(e.at) > c.maxAge {
				delete(c.entries, id)
			}
		}
	}
}

// refuses returns the error the cache can answer r with, or nil when the
// store must decide. Only entries younger than maxAge count.
func (c *priceCache) refuses(r bidgate.BidRequest) error {
	c.mu.Lock()
	e, ok := c.entries[r.AuctionID]
	c.mu.Unlock()
	switch {
	case !ok || time.Since(e.at) > c.maxAge:
		return nil
	case e.seller != 0 && e.seller == r.BidderID:
		return bidgate.ErrSelfBidding // what the store says first
	case e.closed:
		return bidgate.ErrAuctionClosed
	case r.Amount.LessThan(e.price.Add(e.inc)):
		return &bidgate.BidTooLowError{CurrentPrice: e.price, MinimumBid: e.price.Add(e.inc)}
	}
	return nil
}
