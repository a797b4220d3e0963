package redisstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config says where Redis is and how to log in: one address for a single
// server, several for a Redis Cluster.
type Config struct {
	Addrs       []string      // host:port of the server, or of some nodes of the cluster
	Username    string        // ACL user; empty: the default user
	Password    string        // empty: none
	TLS         *tls.Config   // nil: plaintext
	PingTimeout time.Duration // how long Open waits for the first answer
	// Timeout bounds each call on its own: connecting, sending, reading the
	// answer, waiting for a free pooled connection. A caller's context
	// deadline bounds it too, whichever is first, so that a stalled server
	// holds nobody past their budget.
	Timeout time.Duration
}

// DefaultConfig is the one statement of the Redis defaults: Open fills a
// zero field from it, and the command line's flags take theirs from it.
func DefaultConfig() Config {
	return Config{Addrs: []string{"127.0.0.1:6379"}, PingTimeout: 5 * time.Second, Timeout: 2 * time.Second}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if len(c.Addrs) == 0 {
		c.Addrs = d.Addrs
	}
	c.PingTimeout = cmp.Or(c.PingTimeout, d.PingTimeout)
	c.Timeout = cmp.Or(c.Timeout, d.Timeout)
	return c
}

// Open returns a client of the Redis server or cluster of c, once it
// answers.
func Open(ctx context.Context, c Config) (redis.UniversalClient, error) {
	c = c.withDefaults()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:     c.Addrs,
		Username:  c.Username,
		Password:  c.Password,
		TLSConfig: c.TLS,

		DialTimeout:           c.Timeout,
		ReadTimeout:           c.Timeout,
		WriteTimeout:          c.Timeout,
		PoolTimeout:           c.Timeout,
		ContextTimeoutEnabled: true,
	})
	pingCtx, cancel := context.WithTimeout(ctx, c.PingTimeout)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("reach Redis at %s (is it running? see README): %w", strings.Join(c.Addrs, ","), err)
	}
	return rdb, nil
}
