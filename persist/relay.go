package persist

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"bidgate"
)

var (
	//go:embed lua/set_max_id.lua
	setMaxIDLua    string
	setMaxIDScript = redis.NewScript(setMaxIDLua)
	//go:embed sql/hot_auctions.sql
	hotAuctionsSQL string
)

// Writer is the part of a Kafka writer the relays use; *kafka.Writer is one.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// RelayConfig tunes a Relay. Zero values take the defaults.
type RelayConfig struct {
	Interval time.Duration // between passes when idle; default 20ms
	Batch    int           // log entries per auction per pass; default 1000
	// Refeed is how long the persisted position may lag the relayed one
	// before the relay assumes Kafka lost messages (an embedded broker
	// restarted, say) and produces again from the persisted position.
	// Default 15s.
	Refeed time.Duration
	// Owns says whether this node relays an auction; nil relays all.
	Owns func(auctionID int64) bool
	// Linger is how long after closing an auction's log is still followed;
	// default 1h.
	Linger time.Duration
	// Refresh is how often the list of hot auctions is read from
	// PostgreSQL; auctions this process accepts bids for join it at once
	// (Notify). Default 1s.
	Refresh time.Duration
	Log     *slog.Logger
}

// Relay produces the bids accepted on the hot path to Kafka. Each auction's
// Redis log holds its accepted bids in the same atomic step that accepted
// them; the relay reads past the auction's relayed cursor, produces the
// entries (acks from all in-sync replicas), then advances the cursor. A
// crash between the two produces duplicates, never a gap, and whoever relays
// the auction next resumes from the cursor. A log entry is trimmed only once
// the persister has recorded it in PostgreSQL.
type Relay struct {
	db      Querier
	rdb     redis.UniversalClient
	w       Writer
	cfg     RelayConfig
	metrics *relayMetrics
	wake    chan struct{}

	mu        sync.Mutex
	lagging   map[int64]time.Time // auction -> since when persisted < relayed
	hot       map[int64]bool      // auctions to follow
	refreshed time.Time

	// afterProduce, when set (tests), runs between produce and cursor
	// advance; an error aborts the pass there.
	afterProduce func(auctionID int64) error
}

// NewRelay returns a Relay that follows the hot auctions db lists, producing
// with w, metrics on reg.
func NewRelay(db Querier, rdb redis.UniversalClient, w Writer, cfg RelayConfig, reg prometheus.Registerer) *Relay {
	if cfg.Interval <= 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Refeed <= 0 {
		cfg.Refeed = 15 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Linger <= 0 {
		cfg.Linger = time.Hour
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	return &Relay{db: db, rdb: rdb, w: w, cfg: cfg, metrics: newRelayMetrics(reg),
		wake: make(chan struct{}, 1), lagging: make(map[int64]time.Time), hot: make(map[int64]bool)}
}

// Notify wakes the relay early: bids were just accepted on the auction.
func (r *Relay) Notify(auctionID int64) {
	r.mu.Lock()
	r.hot[auctionID] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends. When Kafka or Redis fails it backs off and
// tries again; the logs keep the bids meanwhile.
func (r *Relay) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		n, err := r.RelayOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.metrics.errors.Inc()
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			r.cfg.Log.Warn("relay pass failed; backing off", "err", err, "backoff", backoff)
		default:
			backoff = 0
		}
		if n > 0 && err == nil {
			continue // more may be waiting
		}
		wait := r.cfg.Interval
		if backoff > 0 {
			wait = backoff
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-time.After(wait):
		}
	}
}

// RelayOnce does one pass over the hot auctions and returns how many log
// entries it produced. Every step is one round trip for all auctions: read
// the cursors, read the new entries, produce them in one Kafka call, then
// advance the cursors.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	all, err := r.hotAuctions(ctx)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for _, id := range all {
		if r.cfg.Owns == nil || r.cfg.Owns(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		r.metrics.lag.Set(0)
		return 0, nil
	}
	views, err := r.look(ctx, ids)
	if err != nil {
		return 0, err
	}

	// Auctions with entries past their cursor.
	var due []*logView
	maxLag := 0.0
	for _, v := range views {
		maxLag = max(maxLag, v.lag)
		if v.relayed.before(v.last) {
			due = append(due, v)
		}
	}
	r.metrics.lag.Set(maxLag)
	if len(due) == 0 {
		return 0, nil
	}

	pipe := r.rdb.Pipeline()
	ranges := make([]*redis.XMessageSliceCmd, len(due))
	for i, v := range due {
		ranges[i] = pipe.XRangeN(ctx, KeysOf(v.id).Log, "("+v.relayed.String(), "+", int64(r.cfg.Batch))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("read logs: %w", err)
	}
	var msgs []kafka.Message
	for i, v := range due {
		entries := ranges[i].Val()
		for _, e := range entries {
			m, err := bidMessage(v.id, e)
			if err != nil {
				return 0, err
			}
			msgs = append(msgs, m)
		}
		if len(entries) > 0 {
			v.next = entries[len(entries)-1].ID
		}
	}
	if err := r.w.WriteMessages(ctx, msgs...); err != nil {
		return 0, fmt.Errorf("produce %d bids: %w", len(msgs), err)
	}
	for _, v := range due {
		if r.afterProduce != nil {
			if err := r.afterProduce(v.id); err != nil {
				return 0, err
			}
		}
	}

	pipe = r.rdb.Pipeline()
	for _, v := range due {
		k := KeysOf(v.id)
		if v.next != "" {
			setMaxIDScript.Eval(ctx, pipe, []string{k.Relayed}, v.next)
		}
		if v.persisted != zeroID {
			// Entries before the persisted one are in PostgreSQL; keep that
			// one so that the log never looks empty while bids exist.
			pipe.XTrimMinID(ctx, k.Log, v.persisted.String())
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return len(msgs), fmt.Errorf("advance relayed cursors: %w", err)
	}
	r.metrics.relayed.Add(float64(len(msgs)))
	return len(msgs), nil
}

// hotAuctions lists the auctions to follow: PostgreSQL's list, read again
// every cfg.Refresh, plus those Notify named since.
func (r *Relay) hotAuctions(ctx context.Context) ([]int64, error) {
	r.mu.Lock()
	stale := time.Since(r.refreshed) >= r.cfg.Refresh
	r.mu.Unlock()
	if stale {
		rows, err := r.db.Query(ctx, hotAuctionsSQL, int64(r.cfg.Linger/time.Second))
		if err != nil {
			return nil, fmt.Errorf("list hot auctions: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, fmt.Errorf("list hot auctions: %w", err)
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
	id                       int64
	relayed, persisted, last streamID
	lag                      float64 // seconds, in Redis time, from the cursor to the newest entry
	next                     string  // cursor after this pass
}

// look reads every auction's cursors, newest entry and status in one round
// trip.
func (r *Relay) look(ctx context.Context, ids []int64) ([]*logView, error) {
	type cmds struct {
		relayed, persisted *redis.StringCmd
		last               *redis.XMessageSliceCmd
	}
	pipe := r.rdb.Pipeline()
	cs := make([]cmds, len(ids))
	for i, id := range ids {
		k := KeysOf(id)
		cs[i] = cmds{relayed: pipe.Get(ctx, k.Relayed), persisted: pipe.Get(ctx, k.Persisted),
			last: pipe.XRevRangeN(ctx, k.Log, "+", "-", 1)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read relay cursors: %w", err)
	}
	views := make([]*logView, len(ids))
	for i, id := range ids {
		v := &logView{id: id}
		var err error
		if v.relayed, err = cursor(cs[i].relayed); err != nil {
			return nil, fmt.Errorf("auction %d: %w", id, err)
		}
		if v.persisted, err = cursor(cs[i].persisted); err != nil {
			return nil, fmt.Errorf("auction %d: %w", id, err)
		}
		if entries := cs[i].last.Val(); len(entries) == 1 {
			if v.last, err = parseStreamID(entries[0].ID); err != nil {
				return nil, fmt.Errorf("auction %d: %w", id, err)
			}
		}
		if v.relayed.before(v.last) {
			v.lag = float64(v.last.ms-v.relayed.ms) / 1000
		}
		v.relayed = r.maybeRefeed(id, v.relayed, v.persisted)
		views[i] = v
	}
	return views, nil
}

// maybeRefeed moves the relay back to the persisted position when the
// persister has been behind the relay for longer than cfg.Refeed: Kafka has
// probably lost what was produced (the persister's duplicates are harmless).
func (r *Relay) maybeRefeed(id int64, relayed, persisted streamID) streamID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !persisted.before(relayed) {
		delete(r.lagging, id)
		return relayed
	}
	since, ok := r.lagging[id]
	if !ok {
		r.lagging[id] = time.Now()
		return relayed
	}
	if time.Since(since) < r.cfg.Refeed {
		return relayed
	}
	delete(r.lagging, id)
	r.metrics.refeeds.Inc()
	r.cfg.Log.Warn("persisted position lags the relayed one: producing again from it",
		"auction", id, "relayed", relayed.String(), "persisted", persisted.String())
	return persisted
}

func cursor(c *redis.StringCmd) (streamID, error) {
	if errors.Is(c.Err(), redis.Nil) {
		return zeroID, nil
	}
	if c.Err() != nil {
		return zeroID, c.Err()
	}
	return parseStreamID(c.Val())
}

// bidMessage turns a log entry (see shard/lua/bid_batch.lua) into a
// bid-accepted message keyed by auction id.
func bidMessage(auctionID int64, e redis.XMessage) (kafka.Message, error) {
	num := func(f string) (int64, error) {
		s, _ := e.Values[f].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("log entry %s: field %s = %q", e.ID, f, s)
		}
		return n, nil
	}
	var b bidgate.BidAccepted
	var cents, atUs, endUs int64
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"seq", &b.Seq}, {"bidder", &b.BidderID}, {"amount", &cents}, {"at_us", &atUs}, {"end_us", &endUs}} {
		if *f.dst, err = num(f.name); err != nil {
			return kafka.Message{}, err
		}
	}
	b.AuctionID, b.StreamID = auctionID, e.ID
	b.RequestID, _ = e.Values["req"].(string)
	b.Amount = bidgate.FormatMoney(bidgate.FromCents(cents))
	b.AcceptedAt, b.EndTime = time.UnixMicro(atUs).UTC(), time.UnixMicro(endUs).UTC()
	v, err := json.Marshal(b)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{Key: []byte(strconv.FormatInt(auctionID, 10)), Value: v}, nil
}

type relayMetrics struct {
	relayed, errors, refeeds prometheus.Counter
	lag                      prometheus.Gauge
}

func newRelayMetrics(reg prometheus.Registerer) *relayMetrics {
	m := &relayMetrics{
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_bids_total", Help: "Hot bids produced to Kafka bid-accepted (duplicates included)."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_errors_total", Help: "Relay passes that failed (Kafka or Redis)."}),
		refeeds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_relay_refeeds_total", Help: "Times the relay produced again from the persisted position."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_relay_lag_seconds", Help: "Largest gap, in Redis time, between an auction's newest log entry and its relayed cursor."}),
	}
	reg.MustRegister(m.relayed, m.errors, m.refeeds, m.lag)
	return m
}
