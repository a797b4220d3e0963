package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"bidgate/fanout"
	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/persist/kafka"
	"bidgate/shard"
)

// config is every setting of the binary. Each flag --some-name can also be
// set by the environment variable BIDGATE_SOME_NAME; a flag on the command
// line wins.
type config struct {
	Listen          string
	PostgresURL     string
	PostgresConns   int
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	LogLevel        string
	LogFormat       string
	Migrate         bool
	RedisAddrs      string
	RedisUsername   string
	RedisPassword   string
	RedisTLS        bool
	RedisTLSCA      string
	JWKSFile        string
	JWKSURL         string
	JWTIssuer       string
	JWTAudience     string
	DevKey          string
	Auth            string
	Shard           shard.Config
	Fanout          fanout.Config
	AllowedOrigins  string
	MaxConns        int
	MaxConnsPerIP   int

	Roles             roleSet
	Kafka             string
	KafkaEmbeddedPort int
	KafkaPartitions   int
	KafkaReplication  int
	PersisterGroup    string
	KafkaTLS          bool
	KafkaTLSCA        string
	KafkaSASL         kafka.SASLConfig

	NodeID            string
	InternalListen    string
	AdminListen       string
	InternalAdvertise string
	GossipBind        string
	GossipPort        int
	GossipAdvertise   string
	Seeds             string
	ClusterKey        string
	ClusterSecret     string
	InsecureCluster   bool
}

func parseConfig(cmd string, args []string) (config, error) {
	c := config{Roles: roleSet{}}
	_ = c.Roles.Set(strings.Join(allRoles, ","))
	fs := flag.NewFlagSet("bidgate "+cmd, flag.ContinueOnError)
	fs.StringVar(&c.PostgresURL, "postgres-url", "postgres://postgres@127.0.0.1:5432/bidgate?sslmode=disable", "PostgreSQL connection URL")
	fs.IntVar(&c.PostgresConns, "postgres-conns", 32, "PostgreSQL pool size")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	if cmd == "serve" {
		fs.StringVar(&c.Listen, "listen", ":8080", "HTTP listen address")
		fs.DurationVar(&c.RequestTimeout, "request-timeout", 5*time.Second, "time budget of one request's store calls")
		fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long graceful shutdown waits for in-flight requests")
		fs.BoolVar(&c.Migrate, "migrate", true, "apply database migrations at start-up")
		fs.StringVar(&c.RedisAddrs, "redis-addrs", "127.0.0.1:6379", "Redis address, or several comma-separated for a Redis Cluster")
		fs.StringVar(&c.RedisUsername, "redis-username", "", "Redis ACL user (empty: the default user)")
		fs.StringVar(&c.RedisPassword, "redis-password", "", "Redis password (prefer BIDGATE_REDIS_PASSWORD)")
		fs.BoolVar(&c.RedisTLS, "redis-tls", false, "connect to Redis over TLS")
		fs.StringVar(&c.RedisTLSCA, "redis-tls-ca", "", "PEM file of the CA Redis's certificate chains to (implies --redis-tls; empty: the system's roots)")
		fs.StringVar(&c.Auth, "auth", "on", "on: bearer tokens required; off: no verification, the ids in request bodies are trusted (development only, warned at every start)")
		fs.StringVar(&c.JWKSFile, "jwt-jwks-file", "", "JWKS file of the token issuer's public keys (re-read when it changes)")
		fs.StringVar(&c.JWKSURL, "jwt-jwks-url", "", "JWKS URL of the token issuer (cached, refreshed, refetched on an unknown key id)")
		fs.StringVar(&c.JWTIssuer, "jwt-issuer", "", "required iss of bearer tokens")
		fs.StringVar(&c.JWTAudience, "jwt-audience", "", "required aud of bearer tokens")
		fs.StringVar(&c.DevKey, "dev-key", "", "development only: trust tokens signed by this private key file (created if missing), issuer "+auth.DevIssuer+", audience "+auth.DevAudience+"; mint them with bidgate token")
		sd, fd := shard.DefaultConfig(), fanout.DefaultConfig()
		fs.IntVar(&c.Shard.MaxBatch, "hot-batch", sd.MaxBatch, "bids per Redis script call on a hot auction (1 disables batching)")
		fs.IntVar(&c.Shard.MaxQueue, "hot-queue", sd.MaxQueue, "bids that may wait on one hot auction before 503")
		fs.Float64Var(&c.Shard.RateLimit, "rate-limit", sd.RateLimit, "bids per second per bidder, across all auctions (negative disables)")
		fs.IntVar(&c.Shard.RateBurst, "rate-burst", sd.RateBurst, "token bucket size per bidder")
		fs.IntVar(&c.Shard.PromoteRate, "promote-rate", sd.PromoteRate, "cold bids per second on one node that promote an auction to hot (negative disables)")
		fs.DurationVar(&c.Shard.CacheMaxAge, "price-cache-age", sd.CacheMaxAge, "how old a cached price may be and still refuse bids")
		fs.IntVar(&c.Shard.Replication.Replicas, "redis-wait-replicas", 0,
			"answer hot bids only once this many Redis replicas hold them (one WAIT per batch; 0: do not wait, a failover may lose acknowledged bids)")
		fs.DurationVar(&c.Shard.Replication.Timeout, "redis-wait-timeout", sd.Replication.Timeout,
			"how long a batch waits for --redis-wait-replicas before its bidders get 503")
		fs.DurationVar(&c.Fanout.Interval, "ws-interval", fd.Interval, "at most one WebSocket message per auction per interval")
		fs.IntVar(&c.Fanout.MaxViewers, "ws-max-viewers", 0, "WebSocket viewers per node before 503 (0: a quarter of the file descriptor limit)")
		fs.IntVar(&c.Fanout.MaxViewersPerAddr, "ws-max-viewers-per-ip", fd.MaxViewersPerAddr, "WebSocket viewers per client address before 429")
		fs.IntVar(&c.MaxConns, "max-conns", 0, "HTTP connections served at once before new ones get 503 (0: half the file descriptor limit)")
		fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", gateway.DefaultConfig().MaxConnsPerIP, "HTTP connections from one client address")
		fs.StringVar(&c.AllowedOrigins, "ws-origins", "", "comma-separated Origin values allowed on WebSocket connections; empty allows all")
		fs.Var(c.Roles, "roles", "comma-separated roles to run: "+strings.Join(allRoles, ","))
		fs.StringVar(&c.Kafka, "kafka", "", "Kafka brokers, comma-separated; empty starts an embedded broker on loopback")
		fs.IntVar(&c.KafkaEmbeddedPort, "kafka-embedded-port", 0, "port of the embedded Kafka broker (0: any free port)")
		fs.IntVar(&c.KafkaPartitions, "kafka-partitions", 8, "partitions of the topics bidgate creates")
		fs.IntVar(&c.KafkaReplication, "kafka-replication", 1, "replication factor of the topics bidgate creates on a real cluster")
		fs.BoolVar(&c.KafkaTLS, "kafka-tls", false, "connect to Kafka over TLS")
		fs.StringVar(&c.KafkaTLSCA, "kafka-tls-ca", "", "PEM file of the CA the Kafka brokers' certificates chain to (implies --kafka-tls; empty: the system's roots)")
		fs.StringVar(&c.KafkaSASL.Mechanism, "kafka-sasl-mechanism", "", "Kafka SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
		fs.StringVar(&c.KafkaSASL.Username, "kafka-sasl-username", "", "Kafka SASL user")
		fs.StringVar(&c.KafkaSASL.Password, "kafka-sasl-password", "", "Kafka SASL password (prefer BIDGATE_KAFKA_SASL_PASSWORD)")
		fs.StringVar(&c.PersisterGroup, "persister-group", "bidgate-persister", "Kafka consumer group of the persisters")
		host, _ := os.Hostname()
		fs.StringVar(&c.NodeID, "node-id", host, "this node's stable id in the cluster")
		fs.StringVar(&c.InternalListen, "internal-listen", "127.0.0.1:8081", "listen address of the internal endpoint that takes forwarded bids (loopback by default: set it to reach other machines)")
		fs.StringVar(&c.AdminListen, "admin-listen", "127.0.0.1:9090", "listen address of the admin endpoint: /metrics, /cluster/* (operator scope), the detailed /readyz (loopback by default)")
		fs.StringVar(&c.InternalAdvertise, "internal-advertise", "", "host:port other nodes reach the internal endpoint at (default: gossip address with the internal port)")
		fs.StringVar(&c.GossipBind, "gossip-bind", "127.0.0.1", "address memberlist binds to")
		fs.IntVar(&c.GossipPort, "gossip-port", 7946, "memberlist port (TCP and UDP)")
		fs.StringVar(&c.GossipAdvertise, "gossip-advertise", "", "address other nodes reach this one at (default --gossip-bind)")
		fs.StringVar(&c.Seeds, "seeds", "", "gossip addresses (host:port, comma-separated) of cluster members to join; empty starts a new cluster")
		fs.StringVar(&c.ClusterKey, "cluster-key", "", "gossip encryption and authentication key, hex (16, 24 or 32 bytes), the same on every node; required unless --insecure-cluster")
		fs.StringVar(&c.ClusterSecret, "cluster-secret", "", "secret (at least 16 bytes) that signs forwarded bids and Kafka messages, the same on every node; required unless --insecure-cluster")
		fs.BoolVar(&c.InsecureCluster, "insecure-cluster", false, "development only: gossip in clear and sign nothing when no --cluster-key / --cluster-secret is given (warned at every start)")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bidgate %s [flags]\n\nEvery flag can also be set as BIDGATE_<FLAG_NAME> in the environment.\n\n", cmd)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "BIDGATE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
		}
	})
	if err != nil {
		return c, err
	}
	if c.PostgresConns < 1 || c.PostgresConns > 1000 {
		return c, fmt.Errorf("--postgres-conns must be from 1 to 1000, got %d", c.PostgresConns)
	}
	if cmd == "serve" {
		switch {
		case c.Shard.MaxBatch < 1 || c.Shard.MaxBatch > 4096:
			return c, fmt.Errorf("--hot-batch must be from 1 to 4096, got %d", c.Shard.MaxBatch)
		case c.Shard.Replication.Replicas < 0:
			return c, fmt.Errorf("--redis-wait-replicas must not be negative, got %d", c.Shard.Replication.Replicas)
		case c.Shard.Replication.Replicas > 0 && c.Shard.Replication.Timeout <= 0:
			return c, fmt.Errorf("--redis-wait-timeout must be positive, got %v", c.Shard.Replication.Timeout)
		case c.Shard.MaxQueue < 1:
			return c, fmt.Errorf("--hot-queue must be positive, got %d", c.Shard.MaxQueue)
		case c.Shard.RateLimit > 0 && c.Shard.RateBurst < 1:
			return c, fmt.Errorf("--rate-burst must be at least 1, got %d", c.Shard.RateBurst)
		case c.Shard.CacheMaxAge <= 0:
			return c, fmt.Errorf("--price-cache-age must be positive")
		case c.KafkaPartitions < 1 || c.KafkaPartitions > 1024:
			return c, fmt.Errorf("--kafka-partitions must be from 1 to 1024, got %d", c.KafkaPartitions)
		case c.KafkaEmbeddedPort < 0 || c.KafkaEmbeddedPort > 65535:
			return c, fmt.Errorf("--kafka-embedded-port must be a port number, got %d", c.KafkaEmbeddedPort)
		}
		if err := c.Roles.check(); err != nil {
			return c, err
		}
		if err := c.checkCluster(); err != nil {
			return c, err
		}
		if _, err := c.kafkaSecurity(); err != nil {
			return c, err
		}
		if _, err := clientTLS(c.RedisTLS, c.RedisTLSCA); err != nil {
			return c, fmt.Errorf("--redis-tls-ca: %w", err)
		}
		if c.Kafka == "" && (c.KafkaTLS || c.KafkaTLSCA != "" || c.KafkaSASL != (kafka.SASLConfig{})) {
			return c, fmt.Errorf("--kafka-tls and --kafka-sasl-* are for a Kafka cluster (--kafka); the embedded broker is plaintext on loopback")
		}
		if c.NodeID == "" {
			return c, fmt.Errorf("--node-id is required")
		}
		if err := c.checkAuth(); err != nil {
			return c, err
		}
		// Connections and viewers take file descriptors; bounded below the
		// limit, a flood is refused instead of ending the process.
		files := descriptorLimit()
		if c.MaxConns == 0 {
			c.MaxConns = max(files/2, 16)
		}
		if c.Fanout.MaxViewers == 0 {
			c.Fanout.MaxViewers = max(files/4, 16)
		}
		if c.Fanout.Interval <= 0 || c.Fanout.MaxViewers < 1 || c.Fanout.MaxViewersPerAddr < 1 || c.MaxConns < 1 || c.MaxConnsPerIP < 1 {
			return c, fmt.Errorf("--ws-interval, --ws-max-viewers, --ws-max-viewers-per-ip, --max-conns and --max-conns-per-ip must be positive")
		}
		if c.AllowedOrigins != "" {
			allowed := strings.Split(c.AllowedOrigins, ",")
			c.Fanout.CheckOrigin = func(origin string) bool { return slices.Contains(allowed, origin) }
		}
	}
	return c, nil
}

func (c config) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", c.LogFormat)
}

// checkAuth makes sure a node that serves the API verifies tokens: from a
// JWKS file or URL with their issuer and audience, or from the dev key.
func (c *config) checkAuth() error {
	switch {
	case c.Auth != "on" && c.Auth != "off":
		return fmt.Errorf("--auth must be on or off, got %q", c.Auth)
	case !c.Roles[roleGateway] || c.Auth == "off":
		return nil
	}
	sources := 0
	for _, v := range []string{c.JWKSFile, c.JWKSURL, c.DevKey} {
		if v != "" {
			sources++
		}
	}
	switch {
	case sources == 0:
		return fmt.Errorf("bidgate serve needs a way to verify bearer tokens: --jwt-jwks-file or --jwt-jwks-url with --jwt-issuer and --jwt-audience, or --dev-key for development (--auth=off turns verification off)")
	case sources > 1:
		return fmt.Errorf("give only one of --jwt-jwks-file, --jwt-jwks-url and --dev-key")
	case c.DevKey != "":
		if c.JWTIssuer == "" {
			c.JWTIssuer = auth.DevIssuer
		}
		if c.JWTAudience == "" {
			c.JWTAudience = auth.DevAudience
		}
	case c.JWTIssuer == "" || c.JWTAudience == "":
		return fmt.Errorf("--jwt-issuer and --jwt-audience are required with --jwt-jwks-file and --jwt-jwks-url")
	}
	return nil
}

// checkCluster makes sure a node only gossips and forwards with its
// cluster: a gossip key (memberlist encrypts and authenticates every
// message with it, so a process without it cannot join) and a secret that
// signs forwarded bids and Kafka messages. --insecure-cluster lifts both
// for development, except that forwarding between nodes still needs the
// secret.
func (c *config) checkCluster() error {
	if c.ClusterKey != "" {
		key, err := hex.DecodeString(c.ClusterKey)
		if err == nil {
			err = memberlist.ValidateKey(key)
		}
		if err != nil {
			return fmt.Errorf("--cluster-key must be 16, 24 or 32 bytes in hex (openssl rand -hex 32): %v", err)
		}
	}
	if c.ClusterSecret != "" && len(c.ClusterSecret) < 16 {
		return fmt.Errorf("--cluster-secret must be at least 16 bytes (openssl rand -hex 32)")
	}
	switch {
	case c.InsecureCluster && c.Seeds != "" && c.ClusterSecret == "":
		return fmt.Errorf("--cluster-secret (or BIDGATE_CLUSTER_SECRET) is required to join a cluster, even with --insecure-cluster: it signs forwarded bids")
	case !c.InsecureCluster && (c.ClusterKey == "" || c.ClusterSecret == ""):
		return fmt.Errorf("bidgate serve needs --cluster-key and --cluster-secret (or BIDGATE_CLUSTER_KEY and BIDGATE_CLUSTER_SECRET), the same on every node; openssl rand -hex 32 makes each. --insecure-cluster runs without them (development only)")
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

// kafkaSecurity is how to reach the Kafka cluster of --kafka.
func (c config) kafkaSecurity() (kafka.Security, error) {
	t, err := clientTLS(c.KafkaTLS, c.KafkaTLSCA)
	if err != nil {
		return kafka.Security{}, fmt.Errorf("--kafka-tls-ca: %w", err)
	}
	return kafka.NewSecurity(t, c.KafkaSASL)
}
