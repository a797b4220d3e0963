package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replication is how many replicas must hold a decision before its bidders
// are answered. Redis replicates asynchronously: a primary that fails over
// loses what it acknowledged but had not yet sent. With Replicas > 0 every
// bid script is followed, on the same connection to the key's primary (WAIT
// counts that connection's writes), by WAIT Replicas Timeout: one round
// trip per batch, not per bid.
type Replication struct {
	Replicas int
	Timeout  time.Duration
}

// ErrNotReplicated says WAIT returned before enough replicas acknowledged:
// the decision was made but may not survive a failover. It is reported as
// bidgate.ErrUnavailable; a retry with the same key tells what was kept.
var ErrNotReplicated = errors.New("not acknowledged by enough Redis replicas")

// NewReplicated returns a Store on rdb whose bid decisions wait for r, and
// whose WaitReplicated waits for r too.
func NewReplicated(rdb redis.UniversalClient, r Replication) *Store {
	return &Store{rdb: rdb, replication: r}
}

// WaitReplicated returns once every write Redis made to the auctions' keys
// before the call is on the replicas the Store's Replication asks for (at
// once without one). The readers of a log (relay, reconciler, closer) call
// it between reading entries and writing them on: an entry whose batch's
// WAIT failed was never acknowledged and would be gone after a failover, so
// handing it to PostgreSQL would give its seq to two bids. It fails with
// ErrNotReplicated, as unavailable, when the replicas do not acknowledge
// within the Timeout.
//
// WAIT counts the writes of its own connection, and replication is one
// ordered stream per primary: a small write to a fence key of each primary
// (auction:{id}:fence, expiring), followed on the same connection by WAIT,
// covers everything the primary wrote before it.
func (s *Store) WaitReplicated(ctx context.Context, ids ...int64) error {
	if s.replication.Replicas <= 0 || len(ids) == 0 {
		return nil
	}
	fences := map[string]int64{} // a primary's address -> one of its auctions
	primaries := map[string]*redis.Client{}
	for _, id := range ids {
		p, err := s.primaryFor(ctx, KeysOf(id).Log)
		if err != nil {
			return err
		}
		addr := p.Options().Addr
		if _, ok := fences[addr]; !ok {
			fences[addr], primaries[addr] = id, p
		}
	}
	for addr, id := range fences {
		pipe := primaries[addr].Pipeline()
		pipe.Set(ctx, fenceKey(id), 1, fenceTTL)
		acked := pipe.Do(ctx, "WAIT", s.replication.Replicas, s.replication.Timeout.Milliseconds())
		if _, err := pipe.Exec(ctx); err != nil {
			s.reloadSlots(err)
			return unavailable(fmt.Errorf("wait for the replicas of %s: %w", addr, err))
		}
		if n, _ := acked.Int64(); n < int64(s.replication.Replicas) {
			return unavailable(fmt.Errorf("the writes on %s: %w: %d of %d within %v", addr, ErrNotReplicated, n,
				s.replication.Replicas, s.replication.Timeout))
		}
	}
	return nil
}

// fenceTTL keeps fence keys from piling up; any value outlives one wait.
const fenceTTL = time.Minute

// fenceKey is auction id's fence key, on its primary.
func fenceKey(id int64) string { return "auction:{" + strconv.FormatInt(id, 10) + "}:fence" }

// runDecision runs a script that decides bids, and then WAIT when asked.
func (s *Store) runDecision(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]any, error) {
	if s.replication.Replicas <= 0 {
		v, err := script.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			s.reloadSlots(err)
		}
		return v, err
	}
	primary, err := s.primaryFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	r := s.runDecisions(ctx, primary, script, []scriptCall{{keys: keys, args: args}})[0]
	if r.err != nil {
		s.reloadSlots(r.err)
		return nil, unavailable(r.err) // MOVED here: the slot moved since MasterForKey
	}
	return r.v, nil
}

// scriptCall is one call of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// scriptReply is one call's reply, or its error.
type scriptReply struct {
	v   []any
	err error
}

// runDecisions runs script once per call in one pipeline on client (a
// single server, or the primary that holds every call's keys), then WAIT
// once when asked: runDecision for many calls. A
// call's error is its own; a failed round trip fails them all. Calls that
// find the script missing (a restarted server) run again with its source,
// and only they: a decision must not be made twice.
func (s *Store) runDecisions(ctx context.Context, client *redis.Client, script *redis.Script, calls []scriptCall) []scriptReply {
	out := make([]scriptReply, len(calls))
	pending := make([]int, len(calls))
	for i := range pending {
		pending[i] = i
	}
	for withSource := false; len(pending) > 0; withSource = true {
		pipe := client.Pipeline()
		cmds := make([]*redis.Cmd, len(pending))
		for j, i := range pending {
			if withSource {
				cmds[j] = script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
			} else {
				cmds[j] = script.EvalSha(ctx, pipe, calls[i].keys, calls[i].args...)
			}
		}
		var acked *redis.Cmd
		if s.replication.Replicas > 0 {
			acked = pipe.Do(ctx, "WAIT", s.replication.Replicas, s.replication.Timeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx) // each command's own error is read below
		notReplicated := s.replicated(acked)
		var missing []int
		for j, i := range pending {
			v, err := cmds[j].Slice()
			switch {
			case !withSource && redis.HasErrorPrefix(err, "NOSCRIPT"):
				missing = append(missing, i)
				continue
			case err == nil && notReplicated != nil:
				err = notReplicated
			}
			out[i] = scriptReply{v: v, err: err}
		}
		pending = missing
	}
	return out
}

// replicated says whether a WAIT's reply, acked, counts the replicas asked
// for (nil: none were asked for), as ErrNotReplicated or WAIT's own error.
func (s *Store) replicated(acked *redis.Cmd) error {
	if acked == nil {
		return nil
	}
	n, err := acked.Int64()
	if err != nil {
		return err
	}
	if n < int64(s.replication.Replicas) {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, s.replication.Replicas, s.replication.Timeout)
	}
	return nil
}

// primaryFor is the client of the primary that holds key.
func (s *Store) primaryFor(ctx context.Context, key string) (*redis.Client, error) {
	p, err := primaryOf(ctx, s.rdb, key)
	if err != nil {
		return nil, unavailable(err)
	}
	return p, nil
}

// reloadSlots has a cluster client read the slot map again after err, which
// may mean its primary moved (a failover): the batch went to the node
// itself, past the client's own redirect handling, so nothing else would.
func (s *Store) reloadSlots(err error) {
	var rerr redis.Error
	if errors.As(err, &rerr) && !redis.HasErrorPrefix(err, "MOVED") && !redis.HasErrorPrefix(err, "CLUSTERDOWN") &&
		!redis.HasErrorPrefix(err, "READONLY") {
		return // the node answered: the script failed, the slot map is right
	}
	reloadSlots(s.rdb)
}
