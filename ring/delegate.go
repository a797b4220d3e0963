package ring

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// delegate gives memberlist this node's metadata. memberlist calls it from
// its own goroutines, so it only reads an atomic pointer; the bytes were
// encoded and size-checked before they were stored.
type delegate struct {
	meta atomic.Pointer[[]byte]
}

var _ memberlist.Delegate = (*delegate)(nil)

func (d *delegate) setMeta(b []byte) { d.meta.Store(&b) }

// NodeMeta returns the metadata, or nothing if it would not fit limit:
// memberlist panics on metadata longer than its limit.
func (d *delegate) NodeMeta(limit int) []byte {
	b := d.meta.Load()
	if b == nil || len(*b) > limit {
		return nil
	}
	return *b
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// eventKind says what an event is.
type eventKind uint8

const (
	evJoin eventKind = iota
	evLeave
	evUpdate
	evReject // not from memberlist: Ring.Reject
	evSync   // not from memberlist: closed once every earlier event is applied
)

// event is one memberlist notification, copied out of memberlist's state.
type event struct {
	kind   eventKind
	node   memberlist.Node
	reason string        // evReject only
	done   chan struct{} // evSync only
}

// queue hands events from memberlist to the ring's goroutine. It is
// unbounded on purpose: memberlist calls NotifyJoin/Leave/Update with its
// node lock held, so a delegate that blocked on a full channel would stall
// gossip, and deadlock outright if the consumer ever waited on memberlist.
// Membership events are few (one per node per change), so the queue stays
// short; wake has room for one signal, enough to say "look again".
type queue struct {
	mu    sync.Mutex
	items []event
	wake  chan struct{}
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

func (q *queue) push(e event) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns every queued event, oldest first.
func (q *queue) take() []event {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// events is the memberlist.EventDelegate: it copies the node and queues it,
// nothing else. It never calls memberlist.
type events struct{ q *queue }

var _ memberlist.EventDelegate = events{}

func (e events) NotifyJoin(n *memberlist.Node)   { e.q.push(event{kind: evJoin, node: copyNode(n)}) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.q.push(event{kind: evLeave, node: copyNode(n)}) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.q.push(event{kind: evUpdate, node: copyNode(n)}) }

// copyNode copies n, including the slices memberlist may replace later.
func copyNode(n *memberlist.Node) memberlist.Node {
	c := *n
	c.Addr = append([]byte(nil), n.Addr...)
	c.Meta = append([]byte(nil), n.Meta...)
	return c
}
