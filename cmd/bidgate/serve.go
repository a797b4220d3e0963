package main

import (
	"bidgate"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"bidgate/closer"
	"bidgate/fanout"
	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/internal/retry"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/ring"
	"bidgate/shard"
)

func migrate(ctx context.Context, cfg config) error {
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	db, err := pgstore.Open(ctx, cfg.PostgresURL, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := pgstore.Migrate(ctx, db)
	if err != nil {
		return err
	}
	log.Info("database migrated", "applied", applied)
	return nil
}

func openRedis(ctx context.Context, cfg config) (redis.UniversalClient, error) {
	tlsConfig, err := clientTLS(cfg.RedisTLS, cfg.RedisTLSCA)
	if err != nil {
		return nil, fmt.Errorf("--redis-tls-ca: %w", err)
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:     strings.Split(cfg.RedisAddrs, ","),
		Username:  cfg.RedisUsername,
		Password:  cfg.RedisPassword,
		TLSConfig: tlsConfig,
	})
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("reach Redis at %s (is it running? see README): %w", cfg.RedisAddrs, err)
	}
	return rdb, nil
}

// node is one bidgate process: its stores and the roles it runs.
type node struct {
	cfg config
	log *slog.Logger
	db  *pgxpool.Pool
	rdb redis.UniversalClient
	reg *prometheus.Registry

	brokers  []string
	kafkaSec kafka.Security
	cleanup  []func()
}

func serve(ctx context.Context, cfg config) error {
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	if cfg.InsecureCluster {
		log.Warn("--insecure-cluster: gossip and Kafka messages are not authenticated when no cluster key or secret is given; any process that reaches the gossip port may join (development only)")
	}
	n := &node{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	defer n.close()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if n.db, err = pgstore.Open(ctx, cfg.PostgresURL, int32(cfg.PostgresConns)); err != nil {
		return err
	}
	n.cleanup = append(n.cleanup, n.db.Close)
	if cfg.Migrate {
		applied, err := pgstore.Migrate(ctx, n.db)
		if err != nil {
			return err
		}
		log.Info("database migrated", "applied", applied)
	}
	if n.rdb, err = openRedis(ctx, cfg); err != nil {
		return err
	}
	n.cleanup = append(n.cleanup, func() { n.rdb.Close() })
	if cfg.Roles.needKafka() {
		if err := n.connectKafka(); err != nil {
			return err
		}
	}

	// A node takes connections only once it can serve them: it joins the
	// cluster first (retrying unanswering seeds until stopped), then listens.
	// Only a port of 0 (any free port) is bound before, to learn the port.
	public, err := bindIfEphemeral(cfg.Listen)
	if err != nil {
		return err
	}
	defer public.close()
	internal, err := bindIfEphemeral(cfg.InternalListen)
	if err != nil {
		return err
	}
	defer internal.close()
	admin, err := bindIfEphemeral(cfg.AdminListen)
	if err != nil {
		return err
	}
	defer admin.close()
	members, err := n.joinRing(ctx, public.port, internal.port)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before joining the cluster")
			return nil
		}
		return err
	}
	left := false
	leave := func() {
		if !left {
			left = true
			if err := members.Leave(5 * time.Second); err != nil {
				log.Warn("leave the cluster", "err", err)
			}
		}
	}
	defer leave()

	// Background roles stop when work ends; the HTTP server first, so that
	// in-flight bids finish before the pipeline behind them stops.
	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	g, work := errgroup.WithContext(work)

	var relay *persist.Relay
	if cfg.Roles[roleRelay] {
		relay = n.bidRelay(members)
		g.Go(func() error { return relay.Run(work) })
		for _, topic := range []string{bidgate.TopicAuctionClosed, bidgate.TopicAuctionCancelled} {
			outbox := n.outboxRelay(topic)
			g.Go(func() error { return outbox.Run(work) })
		}
	}
	if cfg.Roles[rolePersister] {
		p := n.persister()
		g.Go(func() error { return p.Run(work) })
		rec := persist.NewReconciler(n.db, n.rdb, persist.ReconcilerConfig{Replication: cfg.Shard.Replication, Log: log}, n.reg)
		g.Go(func() error { return rec.Run(work) })
	}
	if cfg.Roles.needKafka() && cfg.Kafka != "" {
		g.Go(func() error { n.createTopics(work); return nil })
	}
	if cfg.Roles[roleCloser] {
		c := closer.New(n.db, n.rdb, closer.Config{Replication: cfg.Shard.Replication, Log: log}, n.reg)
		g.Go(func() error { return c.Run(work) })
	}

	var auctions gateway.Auctions
	if cfg.Roles[roleShard] {
		cfg.Shard.Log = log
		if relay != nil {
			cfg.Shard.OnHotAccepted = relay.Notify
		}
		auctions = shard.New(n.db, n.rdb, cfg.Shard, n.reg)
	}
	gw := gateway.Config{RequestTimeout: cfg.RequestTimeout, OpsOnly: !cfg.Roles[roleGateway],
		MaxConns: cfg.MaxConns, MaxConnsPerIP: cfg.MaxConnsPerIP,
		NodeID: cfg.NodeID, Cluster: members, ClusterSecret: []byte(cfg.ClusterSecret)}
	if cfg.Roles[roleGateway] && cfg.Auth == "off" {
		gw.AuthOff = true
		log.Warn("--auth=off: no bearer token is verified; anyone may bid, sell and operate as anyone (development only)")
	} else if cfg.Roles[roleGateway] {
		if gw.Auth, err = n.verifier(work); err != nil {
			return err
		}
	}
	if cfg.Roles[roleGateway] {
		cfg.Fanout.Log = log
		hub := fanout.New(n.rdb, auctions, cfg.Fanout, n.reg)
		g.Go(func() error { return hub.Run(work) })
		gw.Viewers = hub
	}
	srv := gateway.New(gw, auctions, n.ready, n.reg, log)
	ln, err := public.listen()
	if err != nil {
		return err
	}
	inLn, err := internal.listen()
	if err != nil {
		return err
	}
	adLn, err := admin.listen()
	if err != nil {
		return err
	}
	log.Info("bidgate serving", "node", cfg.NodeID, "addr", ln.Addr().String(), "internal", inLn.Addr().String(),
		"admin", adLn.Addr().String(), "gossip", members.Addr(), "roles", cfg.Roles.String())
	served := make(chan error, 3)
	go func() { served <- srv.Serve(ln) }()
	go func() { served <- srv.ServeAdmin(adLn) }()
	go func() { served <- srv.ServeInternal(inLn) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-work.Done():
		err = g.Wait()
		return fmt.Errorf("a background role stopped: %w", err)
	case <-ctx.Done():
	}
	// Leave first, so that the others stop sending bids here, then drain.
	log.Info("leaving the cluster, then finishing in-flight requests", "timeout", cfg.ShutdownTimeout)
	leave()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	stopWork()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("background role", "err", err)
	}
	log.Info("bidgate stopped")
	return nil
}

func (n *node) close() {
	for i := len(n.cleanup) - 1; i >= 0; i-- {
		n.cleanup[i]()
	}
}

func (n *node) ready(ctx context.Context) error {
	if err := n.db.Ping(ctx); err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	if err := n.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// connectKafka uses the configured brokers, or starts the embedded one. It
// never waits for a broker: the roles that use Kafka connect in the
// background and retry, so a node decides bids whatever Kafka's state.
func (n *node) connectKafka() error {
	if n.cfg.Kafka == "" {
		e, err := kafka.StartEmbedded(n.cfg.KafkaEmbeddedPort, n.cfg.KafkaPartitions)
		if err != nil {
			return err
		}
		n.cleanup = append(n.cleanup, e.Close)
		n.brokers = e.Addrs()
		n.log.Warn("started the embedded Kafka broker: messages in memory only (use --kafka for a real cluster)", "addr", n.brokers[0])
		return nil
	}
	n.brokers = strings.Split(n.cfg.Kafka, ",")
	sec, err := n.cfg.kafkaSecurity()
	if err != nil {
		return err
	}
	n.kafkaSec = sec
	return nil
}

// createTopics creates bidgate's topics that Kafka lacks, retrying until it
// has or ctx ends.
func (n *node) createTopics(ctx context.Context) {
	backoff := retry.Backoff{Max: 30 * time.Second}
	failing := retry.Streak{Task: "create Kafka topics", Log: n.log}
	for {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := kafka.EnsureTopics(c, n.brokers, n.kafkaSec, n.cfg.KafkaPartitions, n.cfg.KafkaReplication)
		cancel()
		if err == nil {
			failing.Succeed()
			return
		}
		if ctx.Err() != nil {
			return
		}
		failing.Fail(err, "brokers", n.brokers)
		if !backoff.Wait(ctx) {
			return
		}
	}
}

// bidRelay relays the hot auctions this node owns; a process without the
// shard role owns none on the ring, so it relays them all.
func (n *node) bidRelay(members *ring.Ring) *persist.Relay {
	w := kafka.NewWriter(n.brokers, bidgate.TopicBidAccepted, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { w.Close() })
	cfg := persist.RelayConfig{Secret: []byte(n.cfg.ClusterSecret), Replication: n.cfg.Shard.Replication, Log: n.log}
	if n.cfg.Roles[roleShard] {
		cfg.Owns = func(id int64) bool {
			owner, ok := members.Owner(id)
			return !ok || owner.Name == members.Self().Name
		}
	}
	return persist.NewRelay(n.db, n.rdb, w, cfg, n.reg)
}

// joinRing joins the cluster (or starts one) and advertises this node's
// public and internal ports. Unanswering seeds are retried, with back-off
// and a log line each time, until ctx ends.
func (n *node) joinRing(ctx context.Context, publicPort, internalPort int) (*ring.Ring, error) {
	host := n.cfg.GossipAdvertise
	if host == "" {
		host = n.cfg.GossipBind
	}
	internalAddr := n.cfg.InternalAdvertise
	if internalAddr == "" {
		internalAddr = net.JoinHostPort(host, strconv.Itoa(internalPort))
	}
	var key []byte
	if n.cfg.ClusterKey != "" {
		var err error
		if key, err = hex.DecodeString(n.cfg.ClusterKey); err != nil {
			return nil, fmt.Errorf("--cluster-key must be hex: %w", err)
		}
	}
	var seeds []string
	if n.cfg.Seeds != "" {
		seeds = strings.Split(n.cfg.Seeds, ",")
	}
	return ring.Join(ctx, ring.Config{
		NodeID:        n.cfg.NodeID,
		BindAddr:      n.cfg.GossipBind,
		BindPort:      n.cfg.GossipPort,
		AdvertiseAddr: n.cfg.GossipAdvertise,
		Seeds:         seeds,
		SecretKey:     key,
		InternalAddr:  internalAddr,
		PublicAddr:    net.JoinHostPort(host, strconv.Itoa(publicPort)),
		Roles:         strings.Split(n.cfg.Roles.String(), ","),
		Log:           n.log,
	}, n.reg)
}

// endpoint is a listen address that is bound only when the node is ready to
// serve on it, unless its port is 0 and it had to be bound to learn it.
type endpoint struct {
	addr string
	port int
	ln   net.Listener
}

func bindIfEphemeral(addr string) (*endpoint, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: bad port", addr)
	}
	e := &endpoint{addr: addr, port: port}
	if port == 0 {
		if e.ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		e.port = e.ln.Addr().(*net.TCPAddr).Port
	}
	return e, nil
}

// listen returns the endpoint's listener, binding it now if need be.
func (e *endpoint) listen() (net.Listener, error) {
	if e.ln == nil {
		ln, err := net.Listen("tcp", e.addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", e.addr, err)
		}
		e.ln = ln
	}
	return e.ln, nil
}

func (e *endpoint) close() {
	if e.ln != nil {
		e.ln.Close()
	}
}

// outboxRelay relays one topic's outbox rows; its metrics carry the topic.
func (n *node) outboxRelay(topic string) *persist.OutboxRelay {
	w := kafka.NewWriter(n.brokers, topic, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { w.Close() })
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"topic": topic}, n.reg)
	return persist.NewOutboxRelay(n.db, w, persist.OutboxConfig{Topic: topic, Secret: []byte(n.cfg.ClusterSecret), Log: n.log}, reg)
}

func (n *node) persister() *persist.Persister {
	r := kafka.NewReader(n.brokers, bidgate.TopicBidAccepted, n.cfg.PersisterGroup, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { r.Close() })
	return persist.NewPersister(n.db, n.rdb, r, persist.PersisterConfig{Secret: []byte(n.cfg.ClusterSecret), Log: n.log}, n.reg)
}

// verifier builds the bearer-token verifier of the API.
func (n *node) verifier(ctx context.Context) (*auth.Verifier, error) {
	cfg := auth.Config{JWKSFile: n.cfg.JWKSFile, JWKSURL: n.cfg.JWKSURL,
		Issuer: n.cfg.JWTIssuer, Audience: n.cfg.JWTAudience, Log: n.log}
	if n.cfg.DevKey != "" {
		key, created, err := auth.LoadOrCreateKey(n.cfg.DevKey)
		if err != nil {
			return nil, err
		}
		if cfg.JWKS, err = auth.JWKS(key); err != nil {
			return nil, err
		}
		n.log.Warn("development key: trusting tokens signed by a local key file; use --jwt-jwks-file or --jwt-jwks-url in production",
			"key", n.cfg.DevKey, "created", created, "issuer", cfg.Issuer, "audience", cfg.Audience)
	}
	v, err := auth.NewVerifier(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bearer tokens: %w", err)
	}
	return v, nil
}
