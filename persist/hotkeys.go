package persist

import (
	"fmt"
	"strconv"
)

// HotKeys are a hot auction's Redis keys. They share the hash tag {id}, so
// one script can use them all on a Redis Cluster.
//
//	State     hash: price, inc (cents), leader, end_us, status, window_us, by_us, seq
//	Reqs      hash: request id -> "seq|accepted_us|end_us|bidder|cents"
//	Log       stream of accepted bids: seq, bidder, amount (cents), req, at_us, end_us
//	Relayed   string: id of the last log entry produced to Kafka
//	Persisted string: id of the last log entry known to be in PostgreSQL
type HotKeys struct {
	State, Reqs, Log, Relayed, Persisted string
}

// KeysOf returns auction id's keys.
func KeysOf(id int64) HotKeys {
	tag := "auction:{" + strconv.FormatInt(id, 10) + "}:"
	return HotKeys{State: tag + "state", Reqs: tag + "reqs", Log: tag + "log",
		Relayed: tag + "relayed", Persisted: tag + "persisted"}
}

// IntReply reads an integer from a Lua script's reply: Redis turns Lua
// numbers into integers and leaves strings (as stored) alone.
func IntReply(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case string:
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}
