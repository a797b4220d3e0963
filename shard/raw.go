package shard

// The serialization statements themselves, for tools that measure the
// stores' own ceiling on them (the load-test harness compares bidgate's
// rate to these called straight from Go).

// BidBatchScript is the hot path's Lua source (lua/bid_batch.lua). It takes
// HotScriptKeys(auctionID) and ARGV triples of request id, bidder id, cents.
func BidBatchScript() string { return bidBatchLua }

// HotScriptKeys are the KEYS BidBatchScript takes.
func HotScriptKeys(auctionID int64) []string { return hotKeys(auctionID) }

// ColdBidSQL is the cold path's conditional statement (sql/cold_bid.sql),
// with parameters auction id, bidder id, amount, request id.
func ColdBidSQL() string { return coldBidSQL }
