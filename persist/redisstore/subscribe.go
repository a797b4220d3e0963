package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/retry"
)

// Subscriber receives the state updates of the auctions it is subscribed
// to, over sharded pub/sub: one connection per Redis primary that holds a
// subscribed auction's slot (on a single Redis, one connection).
//
// go-redis would resubscribe a connection after a reconnect with one
// SSUBSCRIBE of all its channels, which a cluster refuses when they span
// slots (CROSSSLOT), and it binds a cluster subscription to the first
// channel's node. So the Subscriber sends one SSUBSCRIBE per auction on a
// connection to that auction's primary, never reuses a connection that
// failed, and subscribes a failed connection's auctions again one by one
// wherever their slots live now (after a failover, on the promoted
// replica). Each confirmation is an Event, so that the reader knows when
// updates may have been missed.
type Subscriber struct {
	rdb    redis.UniversalClient
	kind   channelKind
	events chan Event
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the fields below. It is held across each SSUBSCRIBE and
	// SUNSUBSCRIBE write, so that Redis sees them in the order they were
	// decided in.
	mu       sync.Mutex
	conns    map[string]*shardConn // by primary address
	of       map[int64]*shardConn  // each subscribed auction's; nil: to be subscribed again
	retrying bool                  // resubscribeLost is running
	closed   bool
}

// channelKind is what a Subscriber's ids name: auctions (their state
// updates) or users (their notices).
type channelKind struct {
	channel func(id int64) string
	idOf    func(channel string) (int64, bool)
	// parse reads a message of id's channel into its event.
	parse func(id int64, payload string) Event
}

var (
	auctionUpdates = channelKind{channel: Channel, idOf: auctionOfChannel, parse: func(id int64, payload string) Event {
		u, err := ParseUpdate(payload)
		if err == nil && u.AuctionID != id {
			err = fmt.Errorf("state update of auction %d on auction %d's channel", u.AuctionID, id)
		}
		return Event{AuctionID: id, Update: u, Err: err}
	}}
	userNotices = channelKind{channel: NoticeChannel, idOf: userOfNoticeChannel, parse: func(id int64, payload string) Event {
		return Event{AuctionID: id, Notice: []byte(payload)}
	}}
)

// Event is what a Subscriber receives.
type Event struct {
	// AuctionID is the auction the event is about (for a notice
	// Subscriber, the user); 0 with Err: a connection was lost (its
	// subscriptions will be confirmed again).
	AuctionID int64
	// Subscribed: Redis confirmed the auction's subscription. A
	// confirmation after the first follows a lost connection or a moved
	// slot: updates published in between were missed.
	Subscribed bool
	Update     Update
	Notice     []byte // a notice Subscriber's message: the notice's JSON, as published
	Err        error  // a malformed update (or a lost connection)
}

// shardConn is one pub/sub connection to a primary.
type shardConn struct {
	addr string
	ps   *redis.PubSub
	// leaving counts the SUNSUBSCRIBEs sent per auction whose
	// confirmations have not come back: any other sunsubscribe is Redis
	// dropping the channel because its slot moved away.
	leaving map[int64]int
}

// Subscriber tunables.
const (
	// subscriberPing: a connection silent this long is pinged, and one
	// silent for twice as long is taken for dead.
	subscriberPing = 3 * time.Second
	// subscribeTimeout bounds one attempt to subscribe a lost auction again.
	subscribeTimeout = 5 * time.Second
)

// ErrSubscriberClosed is returned by a closed Subscriber.
var ErrSubscriberClosed = errors.New("redisstore: subscriber closed")

// NewSubscriber returns a Subscriber on rdb (a single Redis or a Redis
// Cluster client) whose Events channel holds up to buffer events. It makes
// no connection before the first Subscribe.
func NewSubscriber(rdb redis.UniversalClient, buffer int) *Subscriber {
	return newSubscriber(rdb, buffer, auctionUpdates)
}

// NewNoticeSubscriber is a Subscriber of users' notice channels
// (NoticeChannel): its ids are user ids, its events carry Notice.
func NewNoticeSubscriber(rdb redis.UniversalClient, buffer int) *Subscriber {
	return newSubscriber(rdb, buffer, userNotices)
}

func newSubscriber(rdb redis.UniversalClient, buffer int, kind channelKind) *Subscriber {
	ctx, cancel := context.WithCancel(context.Background())
	return &Subscriber{rdb: rdb, kind: kind, events: make(chan Event, buffer), ctx: ctx, cancel: cancel,
		conns: map[string]*shardConn{}, of: map[int64]*shardConn{}}
}

// Events delivers confirmations, updates and errors. The channel is never
// closed; it must be read until Close.
func (s *Subscriber) Events() <-chan Event { return s.events }

// Subscribe asks for auction id's updates; an Event with Subscribed tells
// when Redis confirmed it. When its primary cannot be reached now, the
// Subscriber keeps trying, so callers bound their wait for the
// confirmation. Subscribing twice is an error.
func (s *Subscriber) Subscribe(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.rdb.(type) {
	case *redis.ClusterClient, *redis.Client:
	default:
		return fmt.Errorf("subscribe to %s: needs a single Redis or a Redis Cluster client, not %T", s.kind.channel(id), s.rdb)
	}
	if s.closed {
		return ErrSubscriberClosed
	}
	if _, ok := s.of[id]; ok {
		return fmt.Errorf("%s: already subscribed", s.kind.channel(id))
	}
	c, err := s.subscribe(ctx, id)
	s.of[id] = c
	if err != nil {
		s.resubscribeLater()
	}
	return nil
}

// Unsubscribe stops auction id's updates. Some may still arrive before
// Redis confirms it; the reader ignores them.
func (s *Subscriber) Unsubscribe(ctx context.Context, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.of[id]
	delete(s.of, id)
	if !ok || c == nil || s.closed {
		return
	}
	c.leaving[id]++
	if err := c.ps.SUnsubscribe(ctx, s.kind.channel(id)); err != nil {
		s.drop(c, err) // closing the connection ends its subscriptions too
	}
}

// Close closes every connection and stops the Subscriber's goroutines.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.ps.Close()
	}
	s.wg.Wait()
	return nil
}

// subscribe sends auction id's SSUBSCRIBE on a connection to its primary,
// opening one if need be. mu is held.
func (s *Subscriber) subscribe(ctx context.Context, id int64) (*shardConn, error) {
	channel := s.kind.channel(id)
	primary, err := primaryOf(ctx, s.rdb, channel)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", channel, err)
	}
	addr := primary.Options().Addr
	c := s.conns[addr]
	if c == nil {
		// Without channels no connection is made yet: the SSUBSCRIBE
		// below opens it.
		c = &shardConn{addr: addr, ps: primary.SSubscribe(ctx), leaving: map[int64]int{}}
		s.conns[addr] = c
		s.wg.Add(1)
		go s.read(c)
	}
	if err := c.ps.SSubscribe(ctx, channel); err != nil {
		s.drop(c, err)
		return nil, fmt.Errorf("subscribe to %s on %s: %w", channel, addr, err)
	}
	return c, nil
}

// drop forgets a failed connection and has its auctions subscribed again.
// mu is held.
func (s *Subscriber) drop(c *shardConn, cause error) {
	if s.conns[c.addr] != c {
		return // already dropped
	}
	delete(s.conns, c.addr)
	lost := 0
	for id, of := range s.of {
		if of == c {
			s.of[id] = nil
			lost++
		}
	}
	// Closing ends c's reader; the PubSub may have reconnected on its own
	// (sending its combined SSUBSCRIBE), which is why it is not reused.
	_ = c.ps.Close()
	reloadSlots(s.rdb)
	if lost == 0 {
		return // a connection that failed as it opened: its caller hears of it
	}
	s.resubscribeLater()
	ev := Event{Err: fmt.Errorf("dropped the update connection to %s (%d auctions): %w", c.addr, lost, cause)}
	select {
	case s.events <- ev:
	default: // the reader is behind; the confirmations that follow say enough
	}
}

// resubscribeLater starts resubscribeLost unless it runs. mu is held.
func (s *Subscriber) resubscribeLater() {
	if s.retrying || s.closed {
		return
	}
	s.retrying = true
	s.wg.Add(1)
	go s.resubscribeLost()
}

// resubscribeLost subscribes the auctions of lost connections again, with a
// back-off while their primaries cannot be reached (a failover takes a few
// seconds to promote a replica).
func (s *Subscriber) resubscribeLost() {
	defer s.wg.Done()
	var b retry.Backoff
	for {
		if s.resubscribeOnce() {
			return
		}
		reloadSlots(s.rdb)
		if !b.Wait(s.ctx) {
			return
		}
	}
}

// resubscribeOnce tries every auction waiting to be subscribed again, at
// most one failure per primary, and reports whether none is left.
func (s *Subscriber) resubscribeOnce() (done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	failed := map[string]bool{}
	left := 0
	for id, c := range s.of {
		if c != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, subscribeTimeout)
		primary, err := primaryOf(ctx, s.rdb, s.kind.channel(id))
		if err == nil && !failed[primary.Options().Addr] {
			if s.of[id], err = s.subscribe(ctx, id); err != nil {
				failed[primary.Options().Addr] = true
			}
		}
		cancel()
		if s.of[id] == nil {
			left++
		}
	}
	if left == 0 {
		s.retrying = false
	}
	return left == 0
}

// read receives c's messages until c is closed or fails.
func (s *Subscriber) read(c *shardConn) {
	defer s.wg.Done()
	pinged := false
	for {
		msg, err := c.ps.ReceiveTimeout(s.ctx, subscriberPing)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				if err = c.ps.Ping(s.ctx); err == nil {
					pinged = true
					continue
				}
			}
			s.mu.Lock()
			if !errors.Is(err, redis.ErrClosed) {
				s.drop(c, err)
			}
			s.mu.Unlock()
			return
		}
		pinged = false
		ev, ok := s.eventOf(c, msg)
		if !ok {
			continue
		}
		select {
		case s.events <- ev:
		case <-s.ctx.Done():
			return
		}
	}
}

// eventOf turns a message of c into the Event it means, if any.
func (s *Subscriber) eventOf(c *shardConn, msg any) (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Subscription:
		id, ok := s.kind.idOf(m.Channel)
		if !ok {
			return Event{}, false
		}
		switch m.Kind {
		case "ssubscribe":
			return Event{AuctionID: id, Subscribed: true}, s.of[id] == c
		case "sunsubscribe":
			if c.leaving[id] > 0 {
				if c.leaving[id]--; c.leaving[id] == 0 {
					delete(c.leaving, id)
				}
				return Event{}, false
			}
			if s.of[id] == c {
				// Redis dropped the channel: its slot moved to another
				// primary.
				s.of[id] = nil
				s.resubscribeLater()
			}
		}
	case *redis.Message:
		id, ok := s.kind.idOf(m.Channel)
		if !ok || s.of[id] != c {
			return Event{}, false // unsubscribed, or moved to another connection
		}
		return s.kind.parse(id, m.Payload), true
	}
	return Event{}, false
}

// primaryOf is the client of the primary that holds key: rdb itself when it
// is a single Redis.
func primaryOf(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		p, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the primary of %s: %w", key, err)
		}
		return p, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("needs a single Redis or a Redis Cluster client, not %T", rdb)
}

// reloadSlots has a cluster client read the slot map again.
func reloadSlots(rdb redis.UniversalClient) {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}
