package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/closer"
	"bidgate/fanout"
	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/internal/retry"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
	"bidgate/ring"
	"bidgate/shard"
)

// Creating the topics: each attempt is bounded, and failures are retried
// with a back-off up to a cap, until the topics exist.
const (
	topicsAttemptTimeout = 30 * time.Second
	topicsMaxBackoff     = 30 * time.Second
)

// openStores connects to PostgreSQL, migrating it first when asked, and to
// Redis.
func (n *node) openStores(ctx context.Context) error {
	db, err := pgstore.Open(ctx, n.cfg.Postgres.Config)
	if err != nil {
		return err
	}
	n.db = db
	n.cleanup = append(n.cleanup, db.Close)
	if n.cfg.Migrate {
		applied, err := pgstore.Migrate(ctx, db)
		if err != nil {
			return err
		}
		n.log.Info("database migrated", "applied", applied)
	}
	if n.reads, err = pgstore.OpenReads(ctx, db, n.cfg.Postgres.Read, n.reg, n.log); err != nil {
		return err
	}
	n.cleanup = append(n.cleanup, n.reads.Close)
	redisCfg, err := n.cfg.Redis.Config()
	if err != nil {
		return err
	}
	if n.rdb, err = redisstore.Open(ctx, redisCfg); err != nil {
		return err
	}
	n.cleanup = append(n.cleanup, func() { n.rdb.Close() })
	return nil
}

// ready asks PostgreSQL and Redis at once whether they answer, each within
// ctx's deadline: one stalled store neither delays nor hides the other.
func (n *node) ready(ctx context.Context) error {
	pg := make(chan error, 1)
	go func() { pg <- n.db.Ping(ctx) }()
	var pgErr, redisErr error
	if err := n.rdb.Ping(ctx).Err(); err != nil {
		redisErr = fmt.Errorf("redis: %w", err)
	}
	if err := <-pg; err != nil {
		pgErr = fmt.Errorf("PostgreSQL: %w", err)
	}
	return errors.Join(pgErr, redisErr)
}

// connectKafka uses the configured brokers, or starts the embedded one. It
// never waits for a broker: the roles that use Kafka connect in the
// background and retry, so a node decides bids whatever Kafka's state.
func (n *node) connectKafka() error {
	k := n.cfg.Kafka
	var err error
	if n.signer, err = n.cfg.Events.Signer(); err != nil {
		return err
	}
	if n.eventVerifier, err = n.cfg.Events.Verifier(); err != nil {
		return err
	}
	if k.Brokers == "" {
		e, err := kafka.StartEmbedded(k.EmbeddedPort, k.Partitions)
		if err != nil {
			return err
		}
		n.cleanup = append(n.cleanup, e.Close)
		n.brokers = e.Addrs()
		n.log.Warn("started the embedded Kafka broker: messages in memory only (use --kafka for a real cluster)", "addr", n.brokers[0])
		return nil
	}
	n.brokers = k.BrokerList()
	sec, err := k.Security()
	if err != nil {
		return err
	}
	n.kafkaSec = sec
	return nil
}

// joinRing joins the cluster (or starts one) and advertises this node's
// public and internal ports. Unanswering seeds are retried, with back-off
// and a log line each time, until ctx ends.
func (n *node) joinRing(ctx context.Context, publicPort, internalPort int) (*ring.Ring, error) {
	cl := n.cfg.Cluster
	host := cl.GossipAdvertise
	if host == "" {
		host = cl.GossipBind
	}
	internalAddr := cl.InternalAdvertise
	if internalAddr == "" {
		internalAddr = net.JoinHostPort(host, strconv.Itoa(internalPort))
	}
	var key []byte
	if cl.Key != "" {
		var err error
		if key, err = hex.DecodeString(cl.Key); err != nil {
			return nil, fmt.Errorf("--cluster-key must be hex: %w", err)
		}
	}
	var seeds []string
	if cl.Seeds != "" {
		seeds = strings.Split(cl.Seeds, ",")
	}
	return ring.Join(ctx, ring.Config{
		NodeID:        cl.NodeID,
		BindAddr:      cl.GossipBind,
		BindPort:      cl.GossipPort,
		AdvertiseAddr: cl.GossipAdvertise,
		Seeds:         seeds,
		SecretKey:     key,
		// Members prove the cluster secret in their metadata before
		// they own auctions or receive forwarded bids.
		ClusterSecret:         []byte(cl.Secret),
		ClusterSecretPrevious: []byte(cl.SecretPrevious),
		InternalAddr:          internalAddr,
		PublicAddr:            net.JoinHostPort(host, strconv.Itoa(publicPort)),
		Roles:                 strings.Split(n.cfg.Roles.String(), ","),
		Log:                   n.log,
	}, n.reg)
}

// startPipeline starts the roles of --roles behind the bids: the relays,
// the persister and the reconciler, the creation of the topics, the
// closer. It returns the bid relay (nil without the relay role), which the
// shard wakes.
func (n *node) startPipeline(roles *background, members *ring.Ring) *persist.Relay {
	var relay *persist.Relay
	if n.cfg.Roles[roleRelay] {
		relay = n.bidRelay(members)
		roles.run(relay.Run)
		for _, topic := range []string{bidgate.TopicAuctionClosed, bidgate.TopicAuctionCancelled, bidgate.TopicBidNotifications} {
			roles.run(n.outboxRelay(topic).Run)
		}
		if n.cfg.Prune.Keep > 0 {
			cfg := n.cfg.Prune
			cfg.Log = n.log
			roles.run(persist.NewOutboxPruner(n.db, cfg, n.reg).Run)
		}
	}
	if n.cfg.Roles[rolePersister] {
		roles.run(n.persister().Run)
		roles.run(n.reconciler().Run)
	}
	if n.cfg.Roles[roleNotifier] {
		notifier := n.notifier()
		roles.run(notifier.Run)
		roles.run(notifier.RunRetention)
		roles.run(notifier.RunSweep)
	}
	if n.cfg.Roles.needKafka() && n.cfg.Kafka.Brokers != "" {
		roles.run(func(ctx context.Context) error { n.createTopics(ctx); return nil })
	}
	if n.cfg.Roles[roleCloser] {
		roles.run(closer.New(n.db, n.rdb, closer.Config{Replication: n.cfg.Shard.Replication, Log: n.log}, n.reg).Run)
	}
	return relay
}

// createTopics creates bidgate's topics that Kafka lacks, retrying until it
// has or ctx ends.
func (n *node) createTopics(ctx context.Context) {
	backoff := retry.Backoff{Max: topicsMaxBackoff}
	failing := retry.Streak{Task: "create Kafka topics", Log: n.log}
	for {
		c, cancel := context.WithTimeout(ctx, topicsAttemptTimeout)
		err := kafka.EnsureTopics(c, n.brokers, n.kafkaSec, n.cfg.Kafka.Partitions, n.cfg.Kafka.Replication)
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
	cfg := persist.RelayConfig{Signer: n.signer, Replication: n.cfg.Shard.Replication, Log: n.log}
	if n.cfg.Roles[roleShard] {
		cfg.Owns = func(id int64) bool {
			owner, ok := members.Owner(id)
			return !ok || owner.Name == members.Self().Name
		}
	}
	return persist.NewRelay(n.db, n.rdb, w, cfg, n.reg)
}

// noticeOutboxBatch is the outbox relay's batch for bid-notifications.
const noticeOutboxBatch = 5000

// outboxRelay relays one topic's outbox rows; its metrics carry the topic.
func (n *node) outboxRelay(topic string) *persist.OutboxRelay {
	w := kafka.NewWriter(n.brokers, topic, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { w.Close() })
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"topic": topic}, n.reg)
	cfg := persist.OutboxConfig{Topic: topic, Signer: n.signer, Log: n.log}
	if topic == bidgate.TopicBidNotifications {
		// A hot auction's close writes a notice per bidder, thousands at
		// once: bigger batches, fewer round trips per notice.
		cfg.BatchSize = noticeOutboxBatch
	}
	return persist.NewOutboxRelay(n.db, w, cfg, reg)
}

func (n *node) persister() *persist.Persister {
	r := kafka.NewReader(n.brokers, bidgate.TopicBidAccepted, n.cfg.Kafka.PersisterGroup, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { r.Close() })
	return persist.NewPersister(n.db, n.rdb, r, persist.PersisterConfig{Verifier: n.eventVerifier, Log: n.log}, n.reg)
}

func (n *node) notifier() *persist.Notifier {
	r := kafka.NewReader(n.brokers, bidgate.TopicBidNotifications, n.cfg.Kafka.NotifierGroup, n.kafkaSec)
	n.cleanup = append(n.cleanup, func() { r.Close() })
	return persist.NewNotifier(n.db, n.rdb, r, persist.NotifierConfig{Verifier: n.eventVerifier, Log: n.log}, n.reg)
}

func (n *node) reconciler() *persist.Reconciler {
	return persist.NewReconciler(n.db, n.rdb, persist.ReconcilerConfig{Replication: n.cfg.Shard.Replication, Log: n.log}, n.reg)
}

// newServer builds the HTTP API on the shard, when this process decides
// bids; with the gateway role it verifies tokens and serves viewers,
// without it it serves only the operations endpoints.
func (n *node) newServer(roles *background, members *ring.Ring, relay *persist.Relay) (*gateway.Server, error) {
	var (
		auctions gateway.Auctions
		current  fanout.Snapshotter // the viewers' snapshots: never the read replica's
	)
	if n.cfg.Roles[roleShard] {
		svc := n.newShard(relay)
		auctions, current = svc, svc.Current()
		roles.run(n.reads.Run)
	}
	gw := gateway.Config{RequestTimeout: n.cfg.HTTP.RequestTimeout, OpsOnly: !n.cfg.Roles[roleGateway],
		MaxConns: n.cfg.HTTP.MaxConns, MaxConnsPerIP: n.cfg.HTTP.MaxConnsPerIP,
		NodeID: n.cfg.Cluster.NodeID, Cluster: members, ClusterSecret: []byte(n.cfg.Cluster.Secret),
		ClusterSecretPrevious: []byte(n.cfg.Cluster.SecretPrevious)}
	if n.cfg.Roles[roleGateway] {
		if err := n.startGateway(roles, &gw, auctions, current); err != nil {
			return nil, err
		}
	}
	srv := gateway.New(gw, auctions, n.ready, n.reg, n.log)
	roles.run(srv.ShareTokens)
	return srv, nil
}

// newShard is the shard role; a hot bid it accepts wakes relay.
func (n *node) newShard(relay *persist.Relay) *shard.Service {
	cfg := n.cfg.Shard
	cfg.Log = n.log
	cfg.Reads = n.reads
	if relay != nil {
		cfg.OnHotAccepted = relay.Notify
	}
	return shard.New(n.db, n.rdb, cfg, n.reg)
}

// startGateway readies the public API of the gateway role: its token
// verification (none with --auth=off), its WebSocket hub (whose snapshots
// read current, the primary) and its read cache (whose misses read
// auctions, the replica when there is one), which run among the background
// roles.
func (n *node) startGateway(roles *background, gw *gateway.Config, auctions gateway.Auctions, current fanout.Snapshotter) error {
	if n.cfg.Auth.Mode == "off" {
		gw.AuthOff = true
		n.log.Warn("--auth=off: no bearer token is verified; anyone may bid, sell and operate as anyone (development only)")
	} else {
		v, err := n.verifier(roles.ctx)
		if err != nil {
			return err
		}
		gw.Auth = v
	}
	cfg := n.cfg.Fanout
	cfg.Log = n.log
	hub := fanout.New(n.rdb, current, cfg, n.reg)
	roles.run(hub.Run)
	gw.Viewers = hub
	if reader, ok := auctions.(fanout.NoticeReader); ok {
		inbox := fanout.NewInbox(n.rdb, reader, fanout.InboxConfig{MaxPerAddr: cfg.MaxViewersPerAddr, CheckOrigin: cfg.CheckOrigin, Log: n.log}, n.reg)
		roles.run(inbox.Run)
		gw.Inbox = inbox
	}
	rc := n.cfg.ReadCache
	rc.Log = n.log
	if cache := fanout.NewCache(n.rdb, auctions, rc, n.reg); cache != nil {
		roles.run(cache.Run)
		gw.Reads = cache
	}
	return nil
}

// verifier builds the bearer-token verifier of the API.
func (n *node) verifier(ctx context.Context) (*auth.Verifier, error) {
	a := n.cfg.Auth
	cfg := auth.Config{JWKSFile: a.JWKSFile, JWKSURL: a.JWKSURL, Issuer: a.Issuer, Audience: a.Audience, Log: n.log}
	if a.DevKey != "" {
		key, created, err := auth.LoadOrCreateKey(a.DevKey)
		if err != nil {
			return nil, err
		}
		if cfg.JWKS, err = auth.JWKS(key); err != nil {
			return nil, err
		}
		n.log.Warn("development key: trusting tokens signed by a local key file; use --jwt-jwks-file or --jwt-jwks-url in production",
			"key", a.DevKey, "created", created, "issuer", cfg.Issuer, "audience", cfg.Audience)
	}
	v, err := auth.NewVerifier(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bearer tokens: %w", err)
	}
	return v, nil
}

// serveHTTP binds the endpoints not bound yet and serves the three of
// them; the channel receives the error that ends the first to stop.
func (n *node) serveHTTP(srv *gateway.Server, eps *endpoints, members *ring.Ring) (<-chan error, error) {
	ln, err := eps.public.listen()
	if err != nil {
		return nil, err
	}
	inLn, err := eps.internal.listen()
	if err != nil {
		return nil, err
	}
	adLn, err := eps.admin.listen()
	if err != nil {
		return nil, err
	}
	n.log.Info("bidgate serving", "node", n.cfg.Cluster.NodeID, "addr", ln.Addr().String(), "internal", inLn.Addr().String(),
		"admin", adLn.Addr().String(), "gossip", members.Addr(), "roles", n.cfg.Roles.String())
	served := make(chan error, 3)
	go func() { served <- srv.Serve(ln) }()
	go func() { served <- srv.ServeAdmin(adLn) }()
	go func() { served <- srv.ServeInternal(inLn) }()
	return served, nil
}
