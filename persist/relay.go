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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"bidgate"
)

var (
	//go:embed lua/set_max_id.lua
	setMaxIDLua    string
	setMaxIDScript = redis.NewScript(setMaxIDLua)
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
	Log  *slog.Logger
}

// Relay produces the bids accepted on the hot path to Kafka. Each auction's
// Redis log holds its accepted bids in the same atomic step that accepted
// them; the relay reads past the auction's relayed cursor, produces the
// entries (acks from all in-sync replicas), then advances the cursor. A
// crash between the two produces duplicates, never a gap, and whoever relays
// the auction next resumes from the cursor. A log entry is trimmed only once
// the persister has recorded it in PostgreSQL.
type Relay struct {
	rdb     redis.UniversalClient
	w       Writer
	cfg     RelayConfig
	metrics *relayMetrics
	wake    chan struct{}

	mu      sync.Mutex
	lagging map[int64]time.Time // auction -> since when persisted < relayed

	// afterProduce, when set (tests), runs between produce and cursor
	// advance; an error aborts the pass there.
	afterProduce func(auctionID int64) error
}

// NewRelay returns a Relay producing with w, metrics on reg.
func NewRelay(rdb redis.UniversalClient, w Writer, cfg RelayConfig, reg prometheus.Registerer) *Relay {
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
	return &Relay{rdb: rdb, w: w, cfg: cfg, metrics: newRelayMetrics(reg),
		wake: make(chan struct{}, 1), lagging: make(map[int64]time.Time)}
}

// Notify wakes the relay early: bids were just accepted.
func (r *Relay) Notify() {
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
// entries it produced.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	ids, err := r.rdb.SMembers(ctx, HotAuctionsKey).Result()
	if err != nil {
		return 0, fmt.Errorf("list hot auctions: %w", err)
	}
	total, maxLag := 0, 0.0
	var errs []error
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || (r.cfg.Owns != nil && !r.cfg.Owns(id)) {
			continue
		}
		n, lag, err := r.relayAuction(ctx, id)
		total += n
		maxLag = max(maxLag, lag)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay auction %d: %w", id, err))
		}
	}
	r.metrics.relayed.Add(float64(total))
	r.metrics.lag.Set(maxLag)
	return total, errors.Join(errs...)
}

// relayAuction relays one auction's next entries. lag is how far, in Redis
// time, the relayed cursor is behind the newest entry, in seconds.
func (r *Relay) relayAuction(ctx context.Context, id int64) (n int, lag float64, err error) {
	k := KeysOf(id)
	pipe := r.rdb.Pipeline()
	relayedCmd, persistedCmd := pipe.Get(ctx, k.Relayed), pipe.Get(ctx, k.Persisted)
	lastCmd, statusCmd := pipe.XRevRangeN(ctx, k.Log, "+", "-", 1), pipe.HGet(ctx, k.State, "status")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	relayed, err := cursor(relayedCmd)
	if err != nil {
		return 0, 0, err
	}
	persisted, err := cursor(persistedCmd)
	if err != nil {
		return 0, 0, err
	}
	last := zeroID
	if entries := lastCmd.Val(); len(entries) == 1 {
		if last, err = parseStreamID(entries[0].ID); err != nil {
			return 0, 0, err
		}
	}
	if relayed.before(last) {
		lag = float64(last.ms-relayed.ms) / 1000
	}
	relayed = r.maybeRefeed(id, relayed, persisted)

	if !relayed.before(last) {
		// Nothing to relay. A closed auction whose whole log is in
		// PostgreSQL needs no relaying any more.
		if statusCmd.Val() == string(bidgate.StatusClosed) && !persisted.before(last) {
			return 0, 0, r.rdb.SRem(ctx, HotAuctionsKey, id).Err()
		}
		return 0, lag, nil
	}

	entries, err := r.rdb.XRangeN(ctx, k.Log, "("+relayed.String(), "+", int64(r.cfg.Batch)).Result()
	if err != nil {
		return 0, lag, err
	}
	msgs := make([]kafka.Message, 0, len(entries))
	for _, e := range entries {
		m, err := bidMessage(id, e)
		if err != nil {
			return 0, lag, err
		}
		msgs = append(msgs, m)
	}
	if err := r.w.WriteMessages(ctx, msgs...); err != nil {
		return 0, lag, fmt.Errorf("produce %d bids: %w", len(msgs), err)
	}
	if r.afterProduce != nil {
		if err := r.afterProduce(id); err != nil {
			return 0, lag, err
		}
	}
	if err := setMaxIDScript.Run(ctx, r.rdb, []string{k.Relayed}, entries[len(entries)-1].ID).Err(); err != nil {
		return len(msgs), lag, fmt.Errorf("advance relayed cursor: %w", err)
	}
	if persisted != zeroID {
		// Entries up to the persisted one are in PostgreSQL; keep that one
		// so that the log never looks empty while bids exist.
		if err := r.rdb.XTrimMinID(ctx, k.Log, persisted.String()).Err(); err != nil {
			return len(msgs), lag, fmt.Errorf("trim log: %w", err)
		}
	}
	return len(msgs), lag, nil
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
