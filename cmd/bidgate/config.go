package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"bidgate/fanout"
	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/internal/settings"
	"bidgate/persist"
	"bidgate/ring"
	"bidgate/shard"
)

// config is every setting of bidgate serve; bidgate migrate takes only the
// logging and PostgreSQL ones. Each flag --some-name can also be set by the
// environment variable BIDGATE_SOME_NAME; a flag on the command line wins.
type config struct {
	Log      settings.Log
	Postgres settings.Postgres
	Redis    settings.Redis
	Kafka    settings.Kafka
	Events   settings.Events // signs and verifies the Kafka messages
	Migrate  bool            // apply the migrations at start-up

	HTTP      httpConfig
	Roles     roleSet
	Auth      authConfig
	Cluster   clusterConfig
	Shard     shard.Config
	Fanout    fanout.Config
	ReadCache fanout.CacheConfig
	Prune     persist.PruneConfig // of the outbox, on relay nodes
}

// httpConfig is the node's three HTTP endpoints and their limits.
type httpConfig struct {
	Listen          string // the public API
	InternalListen  string // forwarded bids from the other nodes
	AdminListen     string // metrics, cluster routes, the detailed readiness
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	MaxConns        int
	MaxConnsPerIP   int
	AllowedOrigins  string // comma-separated Origin values of WebSocket connections; empty allows all
}

// authConfig is how the API verifies bearer tokens.
type authConfig struct {
	Mode     string // on, or off (no verification, development only)
	JWKSFile string
	JWKSURL  string
	Issuer   string
	Audience string
	DevKey   string // a private key file whose tokens are trusted (development only)
}

// clusterConfig is who this node is in the cluster and how it proves it.
type clusterConfig struct {
	NodeID            string
	InternalAdvertise string // host:port the others reach the internal endpoint at
	GossipBind        string
	GossipPort        int
	GossipAdvertise   string
	Seeds             string // comma-separated gossip addresses of members to join
	Key               string // gossip key, hex
	Secret            string // signs forwarded bids, their answers and join proofs
	SecretPrevious    string // also accepted from other nodes during a rotation of Secret
	Insecure          bool   // development: run without Key and Secret
}

// parseConfig reads the flags and environment of bidgate cmd (serve or
// migrate).
func parseConfig(cmd string, args []string) (config, error) {
	var c config
	err := c.flags(cmd).Parse(args)
	return c, err
}

// flags are the flags of bidgate cmd, which set c.
func (c *config) flags(cmd string) *settings.FlagSet {
	fs := settings.NewFlagSet("bidgate " + cmd)
	c.Log.Register(fs)
	c.Postgres.Register(fs)
	if cmd == "serve" {
		c.registerServe(fs)
	}
	return fs
}

// registerServe adds the flags of bidgate serve and their checks, which
// run in this order.
func (c *config) registerServe(fs *settings.FlagSet) {
	c.Roles = roleSet{}
	fs.BoolVar(&c.Migrate, "migrate", true, "apply database migrations at start-up")
	c.Postgres.RegisterRead(fs)
	c.Redis.Register(fs)
	c.Kafka.Register(fs)
	c.Events.Register(fs)
	c.registerShard(fs)
	c.registerFanout(fs)
	c.registerReadCache(fs)
	c.registerPrune(fs)
	c.HTTP.register(fs)
	c.Roles.register(fs)
	c.Cluster.register(fs)
	c.Auth.register(fs)
	fs.Check(c.check, nil)
}

func (h *httpConfig) register(fs *settings.FlagSet) {
	d := gateway.DefaultConfig()
	fs.StringVar(&h.Listen, "listen", d.Listen, "HTTP listen address")
	fs.StringVar(&h.InternalListen, "internal-listen", d.InternalListen, "listen address of the internal endpoint that takes forwarded bids (loopback by default: set it to reach other machines)")
	fs.StringVar(&h.AdminListen, "admin-listen", d.AdminListen, "listen address of the admin endpoint: /metrics, /cluster/* (operator scope), the detailed /readyz (loopback by default)")
	fs.DurationVar(&h.RequestTimeout, "request-timeout", d.RequestTimeout, "time budget of one request's store calls")
	fs.DurationVar(&h.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "how long graceful shutdown waits for in-flight requests")
	fs.IntVar(&h.MaxConns, "max-conns", 0, "HTTP connections served at once before new ones get 503 (0: half the file descriptor limit)")
	fs.IntVar(&h.MaxConnsPerIP, "max-conns-per-ip", d.MaxConnsPerIP, "HTTP connections from one client address")
	fs.StringVar(&h.AllowedOrigins, "ws-origins", "", "comma-separated Origin values allowed on WebSocket connections; empty allows all")
	fs.Check(func() error {
		return gateway.Config{RequestTimeout: h.RequestTimeout, ShutdownTimeout: h.ShutdownTimeout,
			MaxConns: h.MaxConns, MaxConnsPerIP: h.MaxConnsPerIP}.Validate()
	}, map[string]string{"RequestTimeout": "request-timeout", "ShutdownTimeout": "shutdown-timeout",
		"MaxConns": "max-conns", "MaxConnsPerIP": "max-conns-per-ip"})
}

func (c *config) registerShard(fs *settings.FlagSet) {
	d := shard.DefaultConfig()
	c.Shard = d
	fs.IntVar(&c.Shard.MaxBatch, "hot-batch", d.MaxBatch, "bids per round trip of Redis script calls on the hot path (1 disables batching)")
	fs.DurationVar(&c.Shard.HotGather, "hot-gather", d.HotGather, "least time between two round trips of a busy hot lane (a node's hot auctions on a single Redis server, one on a Cluster): bids that arrive meanwhile share one, each waiting at most this (negative disables)")
	fs.IntVar(&c.Shard.MaxQueue, "hot-queue", d.MaxQueue, "bids that may wait before 503 for a cold auction's turn, or in a hot lane (a node's hot auctions on a single Redis server, one on a Cluster)")
	fs.Float64Var(&c.Shard.RateLimit, "rate-limit", d.RateLimit, "bids per second per bidder, across all auctions (negative disables)")
	fs.IntVar(&c.Shard.RateBurst, "rate-burst", d.RateBurst, "token bucket size per bidder")
	fs.IntVar(&c.Shard.PromoteRate, "promote-rate", d.PromoteRate, "cold bids per second on one node that promote an auction to hot (negative disables)")
	fs.DurationVar(&c.Shard.CacheMaxAge, "price-cache-age", d.CacheMaxAge, "how old a cached price may be and still refuse bids")
	fs.IntVar(&c.Shard.Replication.Replicas, "redis-wait-replicas", d.Replication.Replicas,
		"answer hot bids only once this many Redis replicas hold them (one WAIT per batch; 0: do not wait, a failover may lose acknowledged bids)")
	fs.DurationVar(&c.Shard.Replication.Timeout, "redis-wait-timeout", d.Replication.Timeout,
		"how long a batch waits for --redis-wait-replicas before its bidders get 503")
	fs.DurationVar(&c.Shard.StoreTimeout, "store-timeout", d.StoreTimeout,
		"budget of one bid's store calls; past it the bid gets 503 store_timeout (below --request-timeout and the forwarder's 2s)")
	fs.DurationVar(&c.Shard.ColdLockTimeout, "cold-lock-timeout", d.ColdLockTimeout,
		"how long PostgreSQL lets a cold bid wait for its auction's row lock and run before it cancels it (below --store-timeout)")
	fs.Check(func() error { return c.Shard.Validate() }, map[string]string{
		"MaxBatch": "hot-batch", "HotGather": "hot-gather", "MaxQueue": "hot-queue", "RateBurst": "rate-burst", "CacheMaxAge": "price-cache-age",
		"Replication.Replicas": "redis-wait-replicas", "Replication.Timeout": "redis-wait-timeout",
		"StoreTimeout": "store-timeout", "ColdLockTimeout": "cold-lock-timeout"})
}

func (c *config) registerFanout(fs *settings.FlagSet) {
	d := fanout.DefaultConfig()
	c.Fanout = d
	fs.DurationVar(&c.Fanout.Interval, "ws-interval", d.Interval, "at most one WebSocket message per auction per interval")
	fs.DurationVar(&c.Fanout.MaxInterval, "ws-max-interval", d.MaxInterval, "how far the interval stretches while the node is overloaded, so that viewers give way to bids (equal to --ws-interval: never)")
	fs.DurationVar(&c.Fanout.OverloadLatency, "ws-overload-latency", d.OverloadLatency, "the Go scheduler's latency p99 past which the node counts as overloaded and stretches the interval")
	fs.IntVar(&c.Fanout.MaxViewers, "ws-max-viewers", 0, "WebSocket viewers per node before 503 (0: a quarter of the file descriptor limit)")
	fs.IntVar(&c.Fanout.MaxViewersPerAddr, "ws-max-viewers-per-ip", d.MaxViewersPerAddr, "WebSocket viewers per client address before 429")
	fs.Check(func() error {
		c.sizeForDescriptors()
		return c.Fanout.Validate()
	}, map[string]string{"Interval": "ws-interval", "MaxViewers": "ws-max-viewers", "MaxViewersPerAddr": "ws-max-viewers-per-ip"})
}

func (c *config) registerReadCache(fs *settings.FlagSet) {
	d := fanout.DefaultCacheConfig()
	c.ReadCache = d
	fs.IntVar(&c.ReadCache.Size, "read-cache-size", d.Size, "auctions each node keeps (and subscribes to) for GET /auctions/{id}; 0 turns the read cache off")
	fs.DurationVar(&c.ReadCache.MaxAge, "read-cache-max-age", d.MaxAge, "how old the store read behind a cached open auction may be; published updates keep it current in between")
	fs.Check(func() error { return c.ReadCache.Validate() }, map[string]string{"Size": "read-cache-size", "MaxAge": "read-cache-max-age"})
}

func (c *config) registerPrune(fs *settings.FlagSet) {
	d := persist.DefaultPruneConfig()
	c.Prune = d
	fs.DurationVar(&c.Prune.Keep, "outbox-keep", d.Keep, "how long relay nodes keep outbox rows once published to Kafka (0: for ever)")
	fs.Check(func() error {
		if c.Prune.Keep < 0 {
			return errors.New("--outbox-keep must not be negative (0 keeps published rows for ever)")
		}
		return nil
	}, nil)
}

func (cl *clusterConfig) register(fs *settings.FlagSet) {
	d := ring.DefaultConfig()
	host, _ := os.Hostname()
	fs.StringVar(&cl.NodeID, "node-id", host, "this node's stable id in the cluster")
	fs.StringVar(&cl.InternalAdvertise, "internal-advertise", "", "host:port other nodes reach the internal endpoint at (default: gossip address with the internal port)")
	fs.StringVar(&cl.GossipBind, "gossip-bind", d.BindAddr, "address memberlist binds to")
	fs.IntVar(&cl.GossipPort, "gossip-port", d.BindPort, "memberlist port (TCP and UDP)")
	fs.StringVar(&cl.GossipAdvertise, "gossip-advertise", "", "address other nodes reach this one at (default --gossip-bind)")
	fs.StringVar(&cl.Seeds, "seeds", "", "gossip addresses (host:port, comma-separated) of cluster members to join; empty starts a new cluster")
	fs.StringVar(&cl.Key, "cluster-key", "", "gossip encryption and authentication key, hex (16, 24 or 32 bytes), the same on every node; required unless --insecure-cluster")
	fs.StringVar(&cl.Secret, "cluster-secret", "", "secret (at least 16 bytes) that signs forwarded bids, their answers and the join proof a node shows before it owns auctions, the same on every node; required unless --insecure-cluster")
	fs.StringVar(&cl.SecretPrevious, "cluster-secret-previous", "", "during a rotation of --cluster-secret: a second secret also accepted in the other nodes' join proofs and forwarded bids, never used to sign (deploy/README.md, rotating the cluster secret)")
	fs.BoolVar(&cl.Insecure, "insecure-cluster", false, "development only: gossip in clear and sign nothing when no --cluster-key / --cluster-secret is given (warned at every start)")
}

func (a *authConfig) register(fs *settings.FlagSet) {
	fs.StringVar(&a.Mode, "auth", "on", "on: bearer tokens required; off: no verification, the ids in request bodies are trusted (development only, warned at every start)")
	fs.StringVar(&a.JWKSFile, "jwt-jwks-file", "", "JWKS file of the token issuer's public keys (re-read when it changes)")
	fs.StringVar(&a.JWKSURL, "jwt-jwks-url", "", "JWKS URL of the token issuer (cached, refreshed, refetched on an unknown key id)")
	fs.StringVar(&a.Issuer, "jwt-issuer", "", "required iss of bearer tokens")
	fs.StringVar(&a.Audience, "jwt-audience", "", "required aud of bearer tokens")
	fs.StringVar(&a.DevKey, "dev-key", "", "development only: trust tokens signed by this private key file (created if missing), issuer "+auth.DevIssuer+", audience "+auth.DevAudience+"; mint them with bidgate token")
}

// check checks what spans several groups of settings: the roles, the
// cluster's credentials, the HTTP limits and token verification.
func (c *config) check() error {
	if err := c.Roles.check(); err != nil {
		return err
	}
	if err := c.Cluster.check(); err != nil {
		return err
	}
	if err := c.checkEvents(); err != nil {
		return err
	}
	if c.Shard.StoreTimeout >= c.HTTP.RequestTimeout {
		// The gateway gives a bid no timer of its own: the shard's is its budget.
		return fmt.Errorf("--store-timeout (%v) must be below --request-timeout (%v)", c.Shard.StoreTimeout, c.HTTP.RequestTimeout)
	}
	if c.HTTP.MaxConns < 1 || c.HTTP.MaxConnsPerIP < 1 {
		return errors.New("--max-conns and --max-conns-per-ip must be positive")
	}
	if c.HTTP.AllowedOrigins != "" {
		allowed := strings.Split(c.HTTP.AllowedOrigins, ",")
		c.Fanout.CheckOrigin = func(origin string) bool { return slices.Contains(allowed, origin) }
	}
	return c.checkAuth()
}

// checkEvents makes sure a node that produces Kafka messages signs them and
// one that persists them verifies them: the relay role needs
// --event-signing-key, the persister and notifier roles it or
// --event-verify-keys.
// --insecure-cluster lifts both (nothing signed, nothing checked).
func (c *config) checkEvents() error {
	e := c.Events
	switch {
	case c.Cluster.Insecure:
		return nil
	case c.Roles[roleRelay] && e.SigningKey == "":
		return errors.New("the relay role needs --event-signing-key (or BIDGATE_EVENT_SIGNING_KEY), the same on every node: it signs the Kafka messages; openssl rand -base64 32 makes one. --insecure-cluster runs without it (development only)")
	case c.Roles[rolePersister] && e.SigningKey == "" && e.VerifyKeys == "":
		return errors.New("the persister role needs --event-verify-keys (or --event-signing-key) to check the Kafka messages. --insecure-cluster runs without (development only)")
	case c.Roles[roleNotifier] && e.SigningKey == "" && e.VerifyKeys == "":
		return errors.New("the notifier role needs --event-verify-keys (or --event-signing-key) to check the Kafka messages. --insecure-cluster runs without (development only)")
	}
	return nil
}

// sizeForDescriptors bounds connections and viewers below the process's
// file descriptor limit where no flag bounds them: each takes a
// descriptor, and a flood is then refused instead of ending the process.
func (c *config) sizeForDescriptors() {
	files := descriptorLimit()
	if c.HTTP.MaxConns == 0 {
		c.HTTP.MaxConns = max(files/2, 16)
	}
	if c.Fanout.MaxViewers == 0 {
		c.Fanout.MaxViewers = max(files/4, 16)
	}
}

// checkAuth makes sure a node that serves the API verifies tokens: from a
// JWKS file or URL with their issuer and audience, or from the dev key.
func (c *config) checkAuth() error {
	a := &c.Auth
	switch {
	case a.Mode != "on" && a.Mode != "off":
		return fmt.Errorf("--auth must be on or off, got %q", a.Mode)
	case !c.Roles[roleGateway] || a.Mode == "off":
		return nil
	}
	sources := 0
	for _, v := range []string{a.JWKSFile, a.JWKSURL, a.DevKey} {
		if v != "" {
			sources++
		}
	}
	switch {
	case sources == 0:
		return errors.New("bidgate serve needs a way to verify bearer tokens: --jwt-jwks-file or --jwt-jwks-url with --jwt-issuer and --jwt-audience, or --dev-key for development (--auth=off turns verification off)")
	case sources > 1:
		return errors.New("give only one of --jwt-jwks-file, --jwt-jwks-url and --dev-key")
	case a.DevKey != "":
		if a.Issuer == "" {
			a.Issuer = auth.DevIssuer
		}
		if a.Audience == "" {
			a.Audience = auth.DevAudience
		}
	case a.Issuer == "" || a.Audience == "":
		return errors.New("--jwt-issuer and --jwt-audience are required with --jwt-jwks-file and --jwt-jwks-url")
	}
	return nil
}

// check makes sure a node only gossips and forwards with its cluster: a
// gossip key (memberlist encrypts and authenticates every message with it,
// so a process without it cannot join) and a secret that signs forwarded
// bids and join proofs. --insecure-cluster lifts both for development,
// except that forwarding between nodes still needs the secret.
func (cl *clusterConfig) check() error {
	if cl.NodeID == "" {
		return errors.New("--node-id is required")
	}
	if cl.Key != "" {
		key, err := hex.DecodeString(cl.Key)
		if err == nil {
			err = memberlist.ValidateKey(key)
		}
		if err != nil {
			return fmt.Errorf("--cluster-key must be 16, 24 or 32 bytes in hex (openssl rand -hex 32): %v", err)
		}
	}
	if cl.Secret != "" && len(cl.Secret) < 16 {
		return errors.New("--cluster-secret must be at least 16 bytes (openssl rand -hex 32)")
	}
	if cl.SecretPrevious != "" && (cl.Secret == "" || len(cl.SecretPrevious) < 16) {
		return errors.New("--cluster-secret-previous needs --cluster-secret and must be at least 16 bytes")
	}
	switch {
	case cl.Insecure && cl.Seeds != "" && cl.Secret == "":
		return errors.New("--cluster-secret (or BIDGATE_CLUSTER_SECRET) is required to join a cluster, even with --insecure-cluster: it signs forwarded bids")
	case !cl.Insecure && (cl.Key == "" || cl.Secret == ""):
		return errors.New("bidgate serve needs --cluster-key and --cluster-secret (or BIDGATE_CLUSTER_KEY and BIDGATE_CLUSTER_SECRET), the same on every node; openssl rand -hex 32 makes each. --insecure-cluster runs without them (development only)")
	}
	return nil
}

// descriptorLimit is the process's soft limit on open files.
func descriptorLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 16
	}
	return int(l.Cur)
}
