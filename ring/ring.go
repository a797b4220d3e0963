package ring

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/internal/retry"
)

// Join's retry of unreachable seeds: each attempt tries every seed (each
// bounded by memberlist's TCPTimeout, 1 s), then waits retry's back-off
// between these bounds.
const (
	joinRetryMin = 100 * time.Millisecond
	joinRetryMax = 2 * time.Second
)

// retransmitMult replaces DefaultLocalConfig's 2 with DefaultLANConfig's 4.
// A gossiped message is sent RetransmitMult x ceil(log10(N+1)) times in
// all; at 2, in a 4-node cluster a join reached only 2 of the 3 others from
// each sender, and ~1 join in 8 was missed by one node until the next
// push/pull (15 s). At 4 every node hears it in the first gossip round.
const retransmitMult = 4

var errClosed = errors.New("ring: already left or shut down")

// Ring is this node's view of the cluster. Its methods are safe for
// concurrent use; Owner, Owners, Self and Members never lock.
type Ring struct {
	cfg    Config
	params ringParams
	name   string // memberlist node name of this incarnation
	self   Member // this node as it advertised itself at Join
	addr   string
	log    *slog.Logger
	proofs prover

	ml      *memberlist.Memberlist
	del     *delegate
	q       *queue
	metrics *metrics
	snap    atomic.Pointer[snapshot]

	table map[string]*entry // by node name; owned by run()

	stopping chan struct{} // closed to stop run()
	done     chan struct{} // closed when run() returned

	closeMu sync.Mutex
	closed  bool
}

// Join starts gossiping as cfg.NodeID and, when cfg.Seeds are given, joins
// their cluster (without seeds it starts a new one). Unreachable seeds are
// retried until ctx ends; then Join fails, naming the seeds and the last
// error. Give ctx a deadline: without one Join waits for a seed for ever.
// Metrics are registered on reg (nil: none) and unregistered when the ring
// stops. When Join returns, the ring already holds every member learned
// during the join.
func Join(ctx context.Context, cfg Config, reg prometheus.Registerer) (*Ring, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withAdvertised()
	name := incarnationName(cfg.NodeID)
	md := meta{
		ID:           cfg.NodeID,
		InternalAddr: cfg.InternalAddr,
		PublicAddr:   cfg.PublicAddr,
		Roles:        slices.Clone(cfg.Roles),
		Birth:        time.Now().UnixNano(),
	}
	proofs := newProver(cfg.ClusterSecret, cfg.ClusterSecretPrevious)
	md.Proof = proofs.prove(name, md)
	b, err := md.encode()
	if err != nil {
		return nil, err
	}
	leavingMeta := md
	leavingMeta.Leaving = true
	leavingMeta.Proof = proofs.prove(name, leavingMeta)
	if _, err := leavingMeta.encode(); err != nil {
		return nil, err // Leave re-advertises with the flag: it must fit too
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}

	r := &Ring{
		cfg:      cfg,
		params:   ringParams{partitions: cfg.PartitionCount, replication: cfg.ReplicationFactor, load: cfg.Load},
		name:     name,
		log:      cfg.Log,
		proofs:   proofs,
		del:      &delegate{},
		q:        newQueue(),
		metrics:  m,
		table:    make(map[string]*entry),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.self = Member{Name: name, ID: md.ID, InternalAddr: md.InternalAddr, PublicAddr: md.PublicAddr,
		Roles: slices.Clip(md.Roles), Birth: md.Birth, State: StateAlive, Verified: proofs.enabled()}
	r.del.setMeta(b)
	r.snap.Store(&snapshot{self: r.self, own: &ownership{partitions: uint64(cfg.PartitionCount)}})

	mc := memberlist.DefaultLocalConfig()
	mc.RetransmitMult = retransmitMult
	mc.Name = name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	if cfg.SecretKey != nil {
		mc.SecretKey = slices.Clone(cfg.SecretKey)
	}
	mc.Delegate = r.del
	mc.Events = events{r.q}
	mc.Logger = newMemberlistLogger(cfg.Log.With("node", name))
	if cfg.tune != nil {
		cfg.tune(mc)
	}

	go r.run() // before Create: Create already reports this node's own join
	ml, err := memberlist.Create(mc)
	if err != nil {
		r.stopLoop()
		return nil, fmt.Errorf("ring: start gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	r.ml = ml
	r.addr = ml.LocalNode().Address()

	if len(cfg.Seeds) > 0 {
		if err := r.joinSeeds(ctx); err != nil {
			_ = ml.Shutdown()
			r.stopLoop()
			return nil, err
		}
	}
	r.sync(ctx)
	r.log.Info("ring: joined", "name", name, "addr", r.addr, "seeds", cfg.Seeds,
		"members", len(r.Members()), "roles", cfg.Roles)
	return r, nil
}

// incarnationName is the memberlist name of this process: the operator's id
// and 48 random bits. See the package comment for why it is not the id.
func incarnationName(id string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return id + "-" + hex.EncodeToString(b[:])
}

// joinSeeds contacts the seeds until one answers or ctx ends, waiting
// retry's back-off between attempts.
func (r *Ring) joinSeeds(ctx context.Context) error {
	backoff := retry.Backoff{Min: joinRetryMin, Max: joinRetryMax}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ring: join %v: %w", r.cfg.Seeds, context.Cause(ctx))
		}
		n, err := r.ml.Join(r.cfg.Seeds)
		if n > 0 {
			return nil
		}
		wait := backoff.Next()
		r.log.Warn("ring: no seed answered, retrying", "seeds", r.cfg.Seeds, "attempt", attempt, "retry_in", wait, "err", oneLine(err))
		if !retry.Sleep(ctx, wait) {
			return fmt.Errorf("ring: could not join any of %v in %d attempts (%w); last error: %s",
				r.cfg.Seeds, attempt, context.Cause(ctx), oneLine(err))
		}
	}
}

// oneLine flattens memberlist's multi-line multierror text for a log line.
func oneLine(err error) string {
	if err == nil {
		return "none"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// sync waits until every event queued so far is in the snapshot, or ctx
// ends (then the snapshot is just a little behind).
func (r *Ring) sync(ctx context.Context) {
	done := make(chan struct{})
	r.q.push(event{kind: evSync, done: done})
	select {
	case <-done:
	case <-r.done:
	case <-ctx.Done():
	}
}

// Owner returns the shard member owning auctionID, or false when no shard
// member is known. It reads the current snapshot: no lock, no allocation.
func (r *Ring) Owner(auctionID int64) (Member, bool) {
	return r.snap.Load().own.ownerOf(auctionID)
}

// Owners returns up to n distinct shard members for auctionID in ring
// order: the owner first, then the members to retry on. It returns fewer
// when fewer shard members are known, none when there are none.
func (r *Ring) Owners(auctionID int64, n int) []Member {
	return r.snap.Load().own.ownersOf(auctionID, n)
}

// Self returns this node as the cluster sees it.
func (r *Ring) Self() Member {
	return r.snap.Load().self
}

// Members returns every known member, this one included, with its state,
// sorted by ID then Name. Dead and left members stay listed for a minute.
func (r *Ring) Members() []Member {
	return slices.Clone(r.snap.Load().members)
}

// Reject takes the member named name off this node's ring at once, for
// rejectFor: the forwarder calls it when the member's answer to a forwarded
// bid does not verify, so that the following bids go to the next owner
// straight away instead of to a node that cannot prove it holds the cluster
// secret. reason is logged (it must hold no secret). The rejection is
// counted in bidgate_ring_rejected_members_total{reason="answer"} and shown
// as state "rejected" in Members. It returns at once: the owner table
// without the member is published by the ring's goroutine, typically
// within a millisecond. This node itself is never rejected.
func (r *Ring) Reject(name, reason string) {
	if name == r.name {
		return
	}
	r.q.push(event{kind: evReject, node: memberlist.Node{Name: name}, reason: reason})
}

// Addr returns the host:port this node gossips on, for the others' Seeds.
func (r *Ring) Addr() string { return r.addr }

// Leave leaves the cluster gracefully, then stops: it re-advertises this
// node as leaving (the others take it off their rings and will list it as
// "left", not "dead"), broadcasts the leave, and shuts memberlist down.
// timeout bounds the two broadcasts (typically ~0.1 s each); when it
// passes, the node stops anyway and the others detect it as failed.
func (r *Ring) Leave(timeout time.Duration) error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed {
		return errClosed
	}
	r.closed = true
	deadline := time.Now().Add(timeout)

	var errs []error
	if b, err := r.leavingMeta(); err != nil {
		errs = append(errs, err)
	} else {
		r.del.setMeta(b)
		if err := r.ml.UpdateNode(until(deadline, timeout/2)); err != nil {
			errs = append(errs, fmt.Errorf("ring: announce leaving: %w", err))
		}
	}
	if err := r.ml.Leave(until(deadline, timeout)); err != nil {
		errs = append(errs, fmt.Errorf("ring: leave: %w", err))
	}
	if err := r.stop(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Shutdown stops gossiping without leaving, as a crash would: the others
// declare this node dead after their failure detection (~5 s).
func (r *Ring) Shutdown() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.stop()
}

func (r *Ring) leavingMeta() ([]byte, error) {
	md := meta{ID: r.self.ID, InternalAddr: r.self.InternalAddr, PublicAddr: r.self.PublicAddr,
		Roles: r.self.Roles, Birth: r.self.Birth, Leaving: true}
	md.Proof = r.proofs.prove(r.name, md)
	return md.encode()
}

func (r *Ring) stop() error {
	err := r.ml.Shutdown()
	r.stopLoop()
	if err != nil {
		return fmt.Errorf("ring: shutdown: %w", err)
	}
	return nil
}

func (r *Ring) stopLoop() {
	close(r.stopping)
	<-r.done
	r.metrics.unregister()
}

// until is what is left of the budget before deadline, at most limit, and
// at least a millisecond: memberlist waits for ever on a zero timeout.
func until(deadline time.Time, limit time.Duration) time.Duration {
	return max(min(time.Until(deadline), limit), time.Millisecond)
}
