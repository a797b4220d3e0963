// Package redisstore is bidgate's Redis store: the data model of a hot
// auction (its keys, every Lua script that touches them, the request-record
// and log-entry codecs, the state-update messages on its channel) and the
// per-bidder token buckets, behind typed calls. Nobody else builds a key,
// runs a script or reads a reply here by position.
//
// A hot auction's keys share the hash tag {id}, so one script can use them
// all on a Redis Cluster:
//
//	State     hash: price, inc (cents), leader, end_us, status, window_us, by_us, seq, seller,
//	          max_end_us (the extension cap; 0 or absent: none)
//	Reqs      hash: request id -> record "seq|accepted_us|end_us|bidder|cents"
//	Log       stream of accepted bids: seq, bidder, amount (cents), req, at_us, end_us
//	Relayed   string: id of the last log entry produced to Kafka
//	Persisted string: every bid up to this seq is in PostgreSQL
//	Aliases   hash: bidder -> alias, their rank by first accepted row (the
//	          public name of the leader, lalias in State)
//	Fence     string, expiring: written before a WAIT that proves the log's
//	          earlier entries replicated (WaitReplicated)
//
// and its state updates go out on the sharded channel auction:{id}:updates.
// A user's notices go out on user:{id}:notices, and user:{id}:listening
// (expiring) says they are connected to /ws/me somewhere. lease:<name>
// (expiring) names the process that does work one process at a time is
// enough for (the reconciler's passes).
//
// Amounts are integer cents and times Unix microseconds of Redis TIME.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

// Keys are a hot auction's Redis keys.
type Keys struct {
	State, Reqs, Log, Relayed, Persisted, Aliases string
}

// KeysOf returns auction id's keys.
func KeysOf(id int64) Keys {
	tag := "auction:{" + strconv.FormatInt(id, 10) + "}:"
	return Keys{State: tag + "state", Reqs: tag + "reqs", Log: tag + "log",
		Relayed: tag + "relayed", Persisted: tag + "persisted", Aliases: tag + "aliases"}
}

// all lists every key, for expiry.
func (k Keys) all() []string {
	return []string{k.State, k.Reqs, k.Log, k.Relayed, k.Persisted, k.Aliases}
}

// Store runs the calls on a client: a single Redis, a Cluster or a ring.
type Store struct {
	rdb         redis.UniversalClient
	replication Replication // zero: answer without waiting for replicas
}

// New returns a Store on rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// intReply reads an integer from a Lua script's reply: Redis turns Lua
// numbers into integers and leaves strings (as stored) alone.
func intReply(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case string:
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}

// idReply reads an optional id (a leader, a seller) kept as a string; ""
// or nil is 0, nobody.
func idReply(v any) (int64, error) {
	s, _ := v.(string)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad id %q", s)
	}
	return n, nil
}

// unavailable marks a Redis error as an outage (503 with Retry-After) when
// it is one: no connection, a timeout, or Redis saying it cannot serve now.
// Other replies (a script error, say) are bugs and stay as they are.
func unavailable(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, context.DeadlineExceeded) {
		switch strings.SplitN(rerr.Error(), " ", 2)[0] {
		case "LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS", "MOVED", "ASK":
		default:
			return err
		}
	}
	return fmt.Errorf("%w: %w", bidgate.ErrUnavailable, err)
}
