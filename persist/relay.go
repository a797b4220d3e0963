package persist

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"bidgate"
	"bidgate/internal/retry"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Writer is the part of a Kafka writer the relays use; *kafka.Writer is one.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// RelayConfig tunes a Relay. Zero values take DefaultRelayConfig's.
type RelayConfig struct {
	Interval time.Duration // between passes when idle
	// MaxInterval caps the wait between passes that find nothing: each
	// such pass in a row doubles it from Interval. Notify starts again from
	// Interval, so bids this process accepts are relayed as soon as ever;
	// an idle relay, whose closed auctions are followed for Linger, costs
	// a pass a second instead of one every Interval.
	MaxInterval time.Duration
	Batch       int // log entries per auction per pass
	// Gather is how long after the start of a pass that produced bids the
	// next one starts (at once when one auction's log filled Batch): the
	// bids accepted meanwhile go out together, under one signature and in
	// one produce request per partition, instead of a pass for each of the
	// shard's batches, each woken by Notify. It delays persistence and the
	// outbid notices stored with it by as much, never a bid's answer.
	Gather time.Duration
	// Refeed is how long an auction's persisted position may stand still
	// behind its newest log entry before the relay assumes Kafka lost what
	// was produced (a broker restarted, say) and produces again from the
	// persisted position.
	Refeed time.Duration
	// MaxRefeed caps the wait between re-feeds of an auction whose
	// position did not move after one: each doubles it (an auction whose
	// bids PostgreSQL cannot take, say, is not produced again in full
	// every Refeed for ever).
	MaxRefeed time.Duration
	// Owns says whether this node relays an auction; nil relays all.
	Owns func(auctionID int64) bool
	// Linger is how long after closing an auction's log is still followed.
	Linger time.Duration
	// Refresh is how often the list of hot auctions is read from
	// PostgreSQL; auctions this process accepts bids for join it at once
	// (Notify).
	Refresh time.Duration
	// Signer signs every message with the event-signing key: persisters
	// drop what they cannot verify. Nil signs nothing (an insecure cluster).
	Signer *pkafka.Signer
	// Replication, when it asks for replicas (--redis-wait-replicas),
	// makes the relay hand on only log entries the replicas hold: an entry
	// whose batch was never acknowledged is gone after a failover.
	Replication redisstore.Replication
	Log         *slog.Logger
}

// DefaultRelayConfig is the one statement of the relay's defaults: NewRelay
// fills a zero field from it.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{Interval: 20 * time.Millisecond, MaxInterval: time.Second, Batch: 1000, Gather: 50 * time.Millisecond, Refeed: 5 * time.Second, MaxRefeed: 10 * time.Minute, Linger: time.Hour,
		Refresh: time.Second, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from DefaultRelayConfig.
func (c RelayConfig) withDefaults() RelayConfig {
	d := DefaultRelayConfig()
	c.Interval = cmp.Or(c.Interval, d.Interval)
	c.MaxInterval = cmp.Or(c.MaxInterval, d.MaxInterval)
	c.Batch = cmp.Or(c.Batch, d.Batch)
	c.Gather = cmp.Or(c.Gather, d.Gather)
	c.Refeed = cmp.Or(c.Refeed, d.Refeed)
	c.MaxRefeed = cmp.Or(c.MaxRefeed, d.MaxRefeed)
	c.Linger = cmp.Or(c.Linger, d.Linger)
	c.Refresh = cmp.Or(c.Refresh, d.Refresh)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Relay produces the bids accepted on the hot path to Kafka. Each auction's
// Redis log holds its accepted bids in the same atomic step that accepted
// them; the relay reads past the auction's relayed cursor, produces the
// entries (acks from all in-sync replicas), then advances the cursor. A
// crash between the two produces duplicates, never a gap, and whoever relays
// the auction next resumes from the cursor.
//
// Kafka may still lose what it acknowledged. The persisted position (every
// bid up to it is in PostgreSQL, see WriteHotBids) tells: when it stands
// still behind the log for longer than RelayConfig.Refeed, the relay
// produces again from it.
type Relay struct {
	db      *pgstore.Store
	rdb     *redisstore.Store
	w       Writer
	cfg     RelayConfig
	metrics *relayMetrics
	wake    chan struct{}

	mu        sync.Mutex
	stalled   map[int64]stall // auction -> its persisted position and since when it has not moved
	hot       map[int64]bool  // auctions to follow
	refreshed time.Time

	// afterProduce, when set (tests), runs between produce and cursor
	// advance; an error aborts the pass there.
	afterProduce func(auctionID int64) error
}

// stall is an auction's persisted position as the relay last saw it.
type stall struct {
	pos   int64
	since time.Time
	// refeeds counts the re-feeds at pos: the next waits Refeed << refeeds.
	refeeds int
}

// stuckAfter is how many re-feeds at one position make an auction stuck
// (bidgate_relay_stuck_auctions): Kafka losing what was produced needs one.
const stuckAfter = 2

// NewRelay returns a Relay that follows the hot auctions db lists, producing
// with w, metrics on reg.
func NewRelay(db pgstore.Querier, rdb redis.UniversalClient, w Writer, cfg RelayConfig, reg prometheus.Registerer) *Relay {
	cfg = cfg.withDefaults()
	return &Relay{db: &pgstore.Store{DB: db}, rdb: redisstore.NewReplicated(rdb, cfg.Replication), w: w, cfg: cfg, metrics: newRelayMetrics(reg),
		wake: make(chan struct{}, 1), stalled: make(map[int64]stall), hot: make(map[int64]bool)}
}

// Notify wakes the relay early: bids were just accepted on the auction. A
// relay backing off after a failure finishes its back-off first.
func (r *Relay) Notify(auctionID int64) {
	r.mu.Lock()
	r.hot[auctionID] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends, then returns nil. When Kafka, Redis or
// PostgreSQL fails it backs off and tries again, for ever; the logs keep
// the bids meanwhile.
func (r *Relay) Run(ctx context.Context) error {
	loop := retry.Loop{Task: "relay hot bids to Kafka", Interval: r.cfg.Interval, MaxInterval: r.cfg.MaxInterval, Wake: r.wake, Log: r.cfg.Log,
		OnError: func(error) { r.metrics.errors.Inc() }}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		start := time.Now()
		n, full, err := r.relayOnce(ctx)
		if n > 0 && err == nil && !full {
			retry.Sleep(ctx, r.cfg.Gather-time.Since(start))
		}
		return n > 0, err
	})
}

// RelayOnce does one pass over the hot auctions and returns how many log
// entries it produced. Every step is one round trip for all auctions: read
// the cursors, read the new entries, produce them in one Kafka call, then
// advance the cursors.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	n, _, err := r.relayOnce(ctx)
	return n, err
}

// relayOnce is RelayOnce; full reports that an auction's log gave a whole
// Batch, so more may wait.
func (r *Relay) relayOnce(ctx context.Context) (produced int, full bool, err error) {
	all, err := r.hotAuctions(ctx)
	if err != nil {
		return 0, false, err
	}
	var ids []int64
	for _, id := range all {
		if r.cfg.Owns == nil || r.cfg.Owns(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		r.metrics.lag.Set(0)
		r.metrics.stuck.Set(float64(r.stuck(nil)))
		return 0, false, nil
	}
	views, err := r.look(ctx, ids)
	if err != nil {
		return 0, false, err
	}

	// Auctions with entries past their cursor.
	var due []*logView
	maxLag := 0.0
	for _, v := range views {
		maxLag = max(maxLag, v.lag)
		if v.Relayed.Before(v.Last) {
			due = append(due, v)
		}
	}
	r.metrics.lag.Set(maxLag)
	if len(due) == 0 {
		return 0, false, nil
	}

	ranges := make([]redisstore.LogRange, len(due))
	for i, v := range due {
		ranges[i] = redisstore.LogRange{AuctionID: v.id, From: v.Relayed.Next()}
	}
	logs, err := r.rdb.ReadLogs(ctx, ranges, r.cfg.Batch)
	if err != nil {
		return 0, false, err
	}
	if err := r.rdb.WaitReplicated(ctx, withEntries(ranges, logs)...); err != nil {
		return 0, false, err
	}
	var msgs []kafka.Message
	var advance []redisstore.Relayed
	for i, v := range due {
		for _, b := range logs[i] {
			if b.Seq <= v.Persisted {
				continue // already in PostgreSQL
			}
			m, err := bidMessage(b)
			if err != nil {
				return 0, false, err
			}
			msgs = append(msgs, m)
		}
		full = full || len(logs[i]) >= r.cfg.Batch
		if n := len(logs[i]); n > 0 {
			to, err := redisstore.ParseStreamID(logs[i][n-1].StreamID)
			if err != nil {
				return 0, false, fmt.Errorf("auction %d: %w", v.id, err)
			}
			advance = append(advance, redisstore.Relayed{AuctionID: v.id, To: to})
		}
	}
	if len(msgs) > 0 {
		r.cfg.Signer.SignBatch(msgs, bidgate.TopicBidAccepted)
		if err := r.w.WriteMessages(ctx, msgs...); err != nil {
			return 0, false, fmt.Errorf("produce %d bids: %w", len(msgs), err)
		}
	}
	for _, v := range due {
		if r.afterProduce != nil {
			if err := r.afterProduce(v.id); err != nil {
				return 0, false, err
			}
		}
	}
	if err := r.rdb.AdvanceRelayed(ctx, advance); err != nil {
		return len(msgs), full, err
	}
	r.metrics.relayed.Add(float64(len(msgs)))
	if len(msgs) > 0 {
		r.metrics.passes.Inc()
	}
	return len(msgs), full, nil
}

// hotAuctions lists the auctions to follow: PostgreSQL's list, read again
// every cfg.Refresh, plus those Notify named since.
func (r *Relay) hotAuctions(ctx context.Context) ([]int64, error) {
	r.mu.Lock()
	stale := time.Since(r.refreshed) >= r.cfg.Refresh
	r.mu.Unlock()
	if stale {
		ids, err := r.db.HotAuctions(ctx, r.cfg.Linger)
		if err != nil {
			return nil, err
		}
		fresh := make(map[int64]bool, len(ids))
		for _, id := range ids {
			fresh[id] = true
		}
		r.mu.Lock()
		r.hot, r.refreshed = fresh, time.Now()
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, 0, len(r.hot))
	for id := range r.hot {
		ids = append(ids, id)
	}
	return ids, nil
}

// logView is what the relay knows of one auction's log.
type logView struct {
	redisstore.Cursor
	id  int64
	lag float64 // seconds, in Redis time, from the cursor to the newest entry
}

// look reads every auction's cursor, persisted position and newest entry in
// one round trip, and decides which auctions to re-feed.
func (r *Relay) look(ctx context.Context, ids []int64) ([]*logView, error) {
	cursors, err := r.rdb.Cursors(ctx, ids)
	if err != nil {
		return nil, err
	}
	var refeed []int64
	views := make([]*logView, len(ids))
	for i, id := range ids {
		v := &logView{Cursor: cursors[i], id: id}
		if v.Relayed.Before(v.Last) {
			v.lag = float64(v.Last.Ms()-v.Relayed.Ms()) / 1000
		}
		if r.stalledTooLong(v) {
			// The relayed cursor must move back, which AdvanceRelayed
			// never does: drop it, and this pass reads the log from its
			// start (trimmed up to about the persisted position),
			// skipping what is persisted.
			refeed = append(refeed, id)
			v.Relayed = redisstore.StreamID{}
			r.metrics.refeeds.Inc()
			r.metrics.refeedBids.Add(float64(v.LastSeq - v.Persisted))
			r.cfg.Log.Warn("PostgreSQL lags the bid log: producing again from the persisted position",
				"auction", v.id, "persisted_seq", v.Persisted, "log_seq", v.LastSeq, "refeeds_at_this_position", r.refeedsAt(v.id))
		}
		views[i] = v
	}
	r.metrics.stuck.Set(float64(r.stuck(ids)))
	if len(refeed) > 0 {
		if err := r.rdb.ResetRelayed(ctx, refeed); err != nil {
			return nil, err
		}
	}
	return views, nil
}

// stalledTooLong reports whether v's persisted position has stood still
// behind its newest log entry long enough for a re-feed, and restarts the
// clock if so. The wait is Refeed, doubled by every re-feed at the same
// position, up to MaxRefeed: a re-feed that did not move the position
// (PostgreSQL refuses the bids) is not repeated at full rate.
func (r *Relay) stalledTooLong(v *logView) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.Persisted >= v.LastSeq {
		delete(r.stalled, v.id)
		return false
	}
	s, ok := r.stalled[v.id]
	now := time.Now() // how long this process has watched, never an auction decision
	if !ok || s.pos != v.Persisted {
		r.stalled[v.id] = stall{pos: v.Persisted, since: now}
		return false
	}
	if now.Sub(s.since) < refeedWait(r.cfg.Refeed, r.cfg.MaxRefeed, s.refeeds) {
		return false
	}
	r.stalled[v.id] = stall{pos: v.Persisted, since: now, refeeds: s.refeeds + 1}
	return true
}

// refeedWait is the wait before the next re-feed after n at one position.
func refeedWait(first, most time.Duration, n int) time.Duration {
	if n >= 30 || first<<n > most || first<<n <= 0 {
		return most
	}
	return first << n
}

// refeedsAt is how many re-feeds auction id had at its current position.
func (r *Relay) refeedsAt(id int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stalled[id].refeeds
}

// stuck counts the auctions of ids re-fed stuckAfter times or more at one
// position, and forgets the stalls of auctions no longer followed.
func (r *Relay) stuck(ids []int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	followed := make(map[int64]bool, len(ids))
	for _, id := range ids {
		followed[id] = true
	}
	n := 0
	for id, s := range r.stalled {
		switch {
		case !followed[id]:
			delete(r.stalled, id)
		case s.refeeds >= stuckAfter:
			n++
		}
	}
	return n
}

// withEntries lists the auctions of ranges whose logs gave entries.
func withEntries(ranges []redisstore.LogRange, logs [][]bidgate.BidAccepted) []int64 {
	var ids []int64
	for i, r := range ranges {
		if len(logs[i]) > 0 {
			ids = append(ids, r.AuctionID)
		}
	}
	return ids
}

// bidMessage is a bid-accepted message keyed by auction id, to be signed
// with its batch.
func bidMessage(b bidgate.BidAccepted) (kafka.Message, error) {
	v, err := json.Marshal(b)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{Key: []byte(strconv.FormatInt(b.AuctionID, 10)), Value: v}, nil
}

type relayMetrics struct {
	relayed, passes, errors, refeeds, refeedBids prometheus.Counter
	stuck                                        prometheus.Gauge
	lag                                          prometheus.Gauge
}

func newRelayMetrics(reg prometheus.Registerer) *relayMetrics {
	f := promauto.With(reg)
	m := &relayMetrics{
		relayed: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_bids_total", Help: "Hot bids produced to Kafka bid-accepted (duplicates included)."}),
		passes: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_passes_total", Help: "Relay passes that produced bids: bidgate_relay_bids_total over it is the bids one pass carries."}),
		errors: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_errors_total", Help: "Relay passes that failed (Kafka, Redis or PostgreSQL)."}),
		refeeds: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_refeeds_total", Help: "Times the relay produced an auction's log again from its persisted position."}),
		stuck: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_relay_stuck_auctions", Help: "Hot auctions re-fed twice or more at one persisted position with no progress: PostgreSQL does not take their bids (alert when above 0); their re-feeds back off to one per 10 minutes."}),
		refeedBids: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_refeed_bids_total", Help: "Bids behind the persisted position when the relay re-fed (how much PostgreSQL lagged)."}),
		lag: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_relay_lag_seconds", Help: "Largest gap, in Redis time, between an auction's newest log entry and its relayed cursor."}),
	}
	return m
}
