// Package bench is bidgate's load-test harness: open-loop scenarios against
// running nodes (flash sale, hot and cold ceilings, a burst of closings),
// latency histograms, the stores' own limits measured in the same run, an
// audit of the design's invariants over the recorded answers and the rows
// in PostgreSQL and Redis, and text, JSON and HTML reports.
//
// cmd/bidbench is the command line; everything else is here.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"bidgate/internal/auth"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Options are the settings every scenario shares.
type Options struct {
	Targets       string // comma-separated node base URLs, loopback only
	PostgresURL   string
	RedisAddrs    string // comma-separated; several mean a Redis Cluster
	RedisPassword string

	// Metrics are the nodes' Prometheus endpoints, comma-separated,
	// loopback only, scraped for their CPU time: "" finds them as bidgate
	// dev lays its ports out (see discoverMetrics), "off" measures none.
	Metrics string

	// The harness mints its own bearer tokens (see Tokens): with Key, or
	// else with the private key in KeyFile (default the dev cluster's,
	// auth.DevKeyFile, relative to the working directory; "" for runs that
	// send no request, limits), for Issuer and Audience (default the dev
	// cluster's), valid for TokenTTL (default DefaultTokenTTL).
	KeyFile  string
	Key      *auth.SigningKey
	Issuer   string
	Audience string
	TokenTTL time.Duration

	Loader       LoaderConfig
	DrainTimeout time.Duration // bound on waiting for the pipeline before the audit

	Limits         bool          // measure the stores' own limits after the scenario
	LimitsDuration time.Duration // per limit
	// LimitsConns is the most PostgreSQL connections a limit measurement
	// opens; default 16.
	LimitsConns int

	// SkipReady skips the GET /readyz of every target (the limits alone
	// do not load bidgate).
	SkipReady bool

	Seed     uint64    // 0: random
	Progress bool      // draw a progress bar on Stderr
	Stderr   io.Writer // progress and notes
}

// DefaultOptions are the command line's defaults.
func DefaultOptions() Options {
	return Options{
		Targets:        "http://127.0.0.1:8080",
		PostgresURL:    pgstore.DefaultConfig().URL,
		RedisAddrs:     strings.Join(redisstore.DefaultConfig().Addrs, ","),
		KeyFile:        auth.DevKeyFile,
		Issuer:         auth.DevIssuer,
		Audience:       auth.DevAudience,
		TokenTTL:       DefaultTokenTTL,
		Loader:         LoaderConfig{Workers: 512, Queue: 65536, Timeout: 10 * time.Second},
		DrainTimeout:   60 * time.Second,
		Limits:         true,
		LimitsDuration: 3 * time.Second,
		Stderr:         io.Discard,
	}
}

// Env is a connected harness: the targets, the stores and the run's
// randomness.
type Env struct {
	opt     Options
	targets []Target
	db      *pgxpool.Pool
	rdb     redis.UniversalClient
	api     *api
	tokens  *Tokens
	seed    uint64
	streams atomic.Uint64 // rng streams handed out
	bidders bidders
	cpu     *cpuMeter
	// cpuNotes say how the nodes' CPU is measured (or why it is not); every
	// result carries them.
	cpuNotes []string
}

// NewEnv checks that every address is on loopback, loads the signing key,
// connects to PostgreSQL and Redis, and checks that every target is ready.
func NewEnv(ctx context.Context, opt Options) (*Env, error) {
	if opt.Stderr == nil {
		opt.Stderr = io.Discard
	}
	targets, err := ParseTargets(ctx, opt.Targets)
	if err != nil {
		return nil, err
	}
	if opt.Key == nil && opt.KeyFile != "" {
		if opt.Key, err = auth.LoadKey(opt.KeyFile); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: bidbench signs its bearer tokens with the key the nodes trust; "+
					"bidgate dev (make run) creates %s in the directory it runs from: run bidbench from there, or give --key", err, auth.DevKeyFile)
			}
			return nil, err
		}
	}
	if opt.Issuer == "" {
		opt.Issuer = auth.DevIssuer
	}
	if opt.Audience == "" {
		opt.Audience = auth.DevAudience
	}
	addrs := strings.Split(opt.RedisAddrs, ",")
	for _, a := range addrs {
		if err := CheckLoopback(ctx, "--redis-addrs", strings.TrimSpace(a)); err != nil {
			return nil, err
		}
	}
	if err := CheckPostgresLoopback(ctx, opt.PostgresURL); err != nil {
		return nil, err
	}
	e := &Env{opt: opt, targets: targets, seed: opt.Seed,
		tokens: NewTokens(opt.Key, opt.Issuer, opt.Audience, opt.TokenTTL)}
	if e.seed == 0 {
		e.seed = rand.Uint64()
	}
	cfg, err := pgxpool.ParseConfig(opt.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("--postgres-url: %w", err)
	}
	cfg.MaxConns = 8
	if e.db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.db.Ping(pctx); err != nil {
		e.db.Close()
		return nil, fmt.Errorf("reach PostgreSQL (%s): %w", opt.PostgresURL, err)
	}
	for i := range addrs {
		addrs[i] = strings.TrimSpace(addrs[i])
	}
	e.rdb = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, Password: opt.RedisPassword, PoolSize: 128})
	if err := e.rdb.Ping(pctx).Err(); err != nil {
		e.Close()
		return nil, fmt.Errorf("reach Redis (%s): %w", opt.RedisAddrs, err)
	}
	e.api = newAPI(targets, 128, e.tokens)
	if !opt.SkipReady {
		if err := e.api.ready(); err != nil {
			e.Close()
			return nil, err
		}
	}
	e.bidders.base = bidderBase(e.rng().Uint64())
	if err := e.setUpCPU(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close releases the connections.
func (e *Env) Close() {
	if e.api != nil {
		e.api.close()
	}
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
}

// setUpCPU finds the nodes' metrics endpoints and checks that they answer:
// one that does not leaves the server's CPU missing from the report, it
// does not stop the run.
func (e *Env) setUpCPU(ctx context.Context) error {
	e.cpu = &cpuMeter{client: loopbackHTTPClient(), rdb: e.rdb}
	switch strings.TrimSpace(e.opt.Metrics) {
	case "off":
		e.cpu.noURLs = "not measured (--metrics off)"
		return nil
	case "":
		e.cpu.urls, e.cpuNotes = discoverMetrics(ctx, e.cpu.client, e.targets, e.tokens)
	default:
		urls, err := ParseMetricsURLs(ctx, e.opt.Metrics)
		if err != nil {
			return err
		}
		e.cpu.urls = urls
	}
	if len(e.cpu.urls) == 0 {
		e.cpu.noURLs = "no metrics endpoint known (--metrics)"
		return nil
	}
	if s := e.cpu.sample(ctx); s.nodesErr != nil {
		e.cpuNotes = append(e.cpuNotes, fmt.Sprintf("server CPU will be missing: %v (point --metrics at every node's /metrics, or --metrics off)", s.nodesErr))
	}
	return nil
}

// Targets are the nodes under load.
func (e *Env) Targets() []Target { return e.targets }

// rng returns a new random stream of the run (one per goroutine).
func (e *Env) rng() *rand.Rand {
	return rand.New(rand.NewPCG(e.seed, e.streams.Add(1)))
}

func (e *Env) loader(ctx context.Context, rec *Recorder) *Loader {
	return NewLoader(ctx, e.targets, e.opt.Loader, rec, e.tokens)
}

func (e *Env) notef(format string, args ...any) {
	fmt.Fprintf(e.opt.Stderr, "bidbench: "+format+"\n", args...)
}

// User ids. The auctions the harness creates (through the API or in SQL)
// are sold by sellers 1..sellers; bidder ids are all above bidderFloor, so
// no bidder ever bids on an auction of its own (bidgate refuses that: 403
// self_bidding).
const (
	sellers     = 1000
	bidderFloor = 1_000_000
)

// sellerID is the seller of the i-th auction a scenario creates.
func sellerID(i int) int64 { return 1 + int64(i)%sellers }

// bidderBase is where a run's bidder ids start (the first is base+1): at a
// random point above bidderFloor, so that runs do not share token buckets.
func bidderBase(r uint64) int64 { return bidderFloor + int64(r%1_000_000_000)*100 }

// bidders hands out bidder ids round-robin from a pool, so that every
// bidder bids at the same low rate and the per-bidder token bucket is not
// what the run measures.
type bidders struct {
	base int64
	n    int64
	next atomic.Int64
}

func (b *bidders) reset(n int) { b.n = int64(max(1, n)) }

func (b *bidders) id() int64 { return b.base + (b.next.Add(1)-1)%b.n + 1 }
