package settings

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"bidgate/persist/redisstore"
)

// Redis is where Redis is and how to log in to it.
type Redis struct {
	Addrs    string // one address, or several comma-separated for a Redis Cluster
	Username string // ACL user; empty: the default user
	Password string
	TLS      bool
	TLSCA    string // PEM file of the CA the servers' certificates chain to; implies TLS
	Timeout  time.Duration
}

// Register adds every Redis flag (--redis-addrs, --redis-username,
// --redis-password, --redis-tls, --redis-tls-ca) and their check.
func (r *Redis) Register(fs *FlagSet) {
	r.RegisterAddrs(fs)
	fs.StringVar(&r.Username, "redis-username", "", "Redis ACL user (empty: the default user)")
	r.RegisterPassword(fs)
	fs.BoolVar(&r.TLS, "redis-tls", false, "connect to Redis over TLS")
	fs.StringVar(&r.TLSCA, "redis-tls-ca", "", "PEM file of the CA Redis's certificate chains to (implies --redis-tls; empty: the system's roots)")
	fs.DurationVar(&r.Timeout, "redis-timeout", redisstore.DefaultConfig().Timeout,
		"bound of one Redis call (connect, send, answer, wait for a pooled connection), under any tighter deadline of its caller")
	fs.Check(func() error { _, err := r.Config(); return err }, nil)
}

// RegisterAddrs adds --redis-addrs alone.
func (r *Redis) RegisterAddrs(fs *FlagSet) {
	fs.StringVar(&r.Addrs, "redis-addrs", strings.Join(redisstore.DefaultConfig().Addrs, ","),
		"Redis address, or several comma-separated for a Redis Cluster")
}

// RegisterPassword adds --redis-password alone.
func (r *Redis) RegisterPassword(fs *FlagSet) {
	fs.StringVar(&r.Password, "redis-password", "", "Redis password (prefer "+EnvName("redis-password")+")")
}

// Config is r as redisstore.Open takes it, with the CA file read.
func (r Redis) Config() (redisstore.Config, error) {
	tlsConfig, err := clientTLS(r.TLS, r.TLSCA)
	if err != nil {
		return redisstore.Config{}, fmt.Errorf("--redis-tls-ca: %w", err)
	}
	if r.Timeout < 0 {
		return redisstore.Config{}, errors.New("--redis-timeout must not be negative")
	}
	return redisstore.Config{Addrs: strings.Split(r.Addrs, ","), Username: r.Username, Password: r.Password, TLS: tlsConfig,
		Timeout: r.Timeout}, nil
}
