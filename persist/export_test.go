package persist

// Test hooks for the crash-point tests in package persist_test.

func SetAfterProduce(r *Relay, f func(auctionID int64) error) { r.afterProduce = f }

func SetAfterInsert(p *Persister, f func() error) { p.afterInsert = f }

func SetAfterPositions(r *Reconciler, f func()) { r.afterPositions = f }

// RefeedWait is the relay's wait before the next re-feed of an auction.
var RefeedWait = refeedWait
