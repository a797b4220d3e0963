package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"bidgate/gateway"
	"bidgate/internal/settings"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/ring"
)

// migrationConns is the pool of a command that only applies the
// migrations.
const migrationConns = 2

// leaveTimeout bounds how long leaving the cluster waits for the others to
// hear of it.
const leaveTimeout = 5 * time.Second

// migrate is bidgate migrate.
func migrate(ctx context.Context, cfg config) error {
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	applied, err := applyMigrations(ctx, cfg.Postgres.URL)
	if err != nil {
		return err
	}
	log.Info("database migrated", "applied", applied)
	return nil
}

// applyMigrations applies the migrations that the database at url lacks,
// on a pool of its own, and returns their versions.
func applyMigrations(ctx context.Context, url string) ([]int, error) {
	db, err := pgstore.Open(ctx, pgstore.Config{URL: url, MaxConns: migrationConns})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return pgstore.Migrate(ctx, db)
}

// serve is bidgate serve: it runs a node until ctx ends, then leaves the
// cluster, finishes the requests in flight and stops the roles behind
// them.
func serve(ctx context.Context, cfg config) error {
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	log.Debug("garbage collection target", "gc_percent", settings.TuneGC())
	if cfg.Cluster.Insecure {
		log.Warn("--insecure-cluster: gossip and Kafka messages are not authenticated when no cluster key, secret or event-signing key is given; any process that reaches the gossip port may join (development only)")
	}
	n := newNode(cfg, log)
	defer n.close()
	if err := n.openStores(ctx); err != nil {
		return err
	}
	if cfg.Roles.needKafka() {
		if err := n.connectKafka(); err != nil {
			return err
		}
	}

	// A node takes connections only once it can serve them: it joins the
	// cluster first (retrying unanswering seeds until stopped), then listens.
	// Only a port of 0 (any free port) is bound before, to learn the port.
	eps, err := bindEphemeral(cfg.HTTP)
	if err != nil {
		return err
	}
	defer eps.close()
	members, err := n.joinRing(ctx, eps.public.port, eps.internal.port)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before joining the cluster")
			return nil
		}
		return err
	}
	place := &membership{ring: members, log: log}
	defer place.leave()

	roles := startBackground()
	defer roles.stop()
	relay := n.startPipeline(roles, members)
	srv, err := n.newServer(roles, members, relay)
	if err != nil {
		return err
	}
	served, err := n.serveHTTP(srv, eps, members)
	if err != nil {
		return err
	}
	return n.runUntilStopped(ctx, srv, served, roles, place)
}

// node is one bidgate process: its stores and the roles it runs.
type node struct {
	cfg   config
	log   *slog.Logger
	db    *pgxpool.Pool
	reads *pgstore.Reads // reads that may go to a replica
	rdb   redis.UniversalClient
	reg   *prometheus.Registry

	brokers       []string
	kafkaSec      kafka.Security
	signer        *kafka.Signer   // signs what the relays produce; nil: nothing signed
	eventVerifier *kafka.Verifier // checks what the persister consumes; nil: nothing checked
	cleanup       []func()
}

func newNode(cfg config, log *slog.Logger) *node {
	n := &node{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return n
}

// close releases what the node opened, the last first.
func (n *node) close() {
	for i := len(n.cleanup) - 1; i >= 0; i-- {
		n.cleanup[i]()
	}
}

// runUntilStopped waits for ctx to end, an endpoint to fail or a
// background role to stop. When ctx ends it shuts the node down
// gracefully: it leaves the cluster first, so that the others stop sending
// bids here, then finishes the requests in flight, then stops the roles
// behind them.
func (n *node) runUntilStopped(ctx context.Context, srv *gateway.Server, served <-chan error, roles *background, place *membership) error {
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-roles.ctx.Done():
		return fmt.Errorf("a background role stopped: %w", roles.wait())
	case <-ctx.Done():
	}
	n.log.Info("leaving the cluster, then finishing in-flight requests", "timeout", n.cfg.HTTP.ShutdownTimeout)
	place.leave()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), n.cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		n.log.Warn("HTTP shutdown", "err", err)
	}
	roles.stop()
	if err := roles.wait(); err != nil && !errors.Is(err, context.Canceled) {
		n.log.Warn("background role", "err", err)
	}
	n.log.Info("bidgate stopped")
	return nil
}

// background runs the roles that work behind the HTTP API (relays,
// persister, reconciler, closer, fan-out). They run until stop, not until
// the command's context ends: at shutdown the HTTP server stops first, so
// that bids in flight finish before the pipeline behind them stops. One
// that fails stops the others.
type background struct {
	ctx  context.Context // ends on stop or a role's failure
	stop context.CancelFunc
	g    *errgroup.Group
}

func startBackground() *background {
	ctx, stop := context.WithCancel(context.Background())
	g, ctx := errgroup.WithContext(ctx)
	return &background{ctx: ctx, stop: stop, g: g}
}

// run starts role, which returns when its context ends.
func (b *background) run(role func(context.Context) error) {
	b.g.Go(func() error { return role(b.ctx) })
}

// wait returns once every role returned, with the first failure.
func (b *background) wait() error { return b.g.Wait() }

// membership is this node's place in the cluster, left once: at shutdown
// before the drain, or on the way out after a failure.
type membership struct {
	ring *ring.Ring
	log  *slog.Logger
	left bool
}

func (m *membership) leave() {
	if m.left {
		return
	}
	m.left = true
	if err := m.ring.Leave(leaveTimeout); err != nil {
		m.log.Warn("leave the cluster", "err", err)
	}
}
