package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Config tunes the HTTP server. A zero field takes its value from
// DefaultConfig.
type Config struct {
	// Listen, InternalListen and AdminListen are where a node serves the
	// public API, the bids other nodes forward, and the operator endpoint;
	// the command binds them and hands the listeners to Serve*.
	Listen, InternalListen, AdminListen string
	// ShutdownTimeout is how long a stopping node lets in-flight requests
	// finish.
	ShutdownTimeout time.Duration

	MaxBodyBytes   int           // the largest request body served
	RequestTimeout time.Duration // budget of one request's store calls
	ReadTimeout    time.Duration // time to read one request, headers and body
	WriteTimeout   time.Duration // time to write one answer
	IdleTimeout    time.Duration // keep-alive idle time of a connection
	// MaxConns bounds the connections served at once (beyond it a new one
	// gets a 503 and is closed; past 90% of it, idle keep-alive connections
	// are closed first, the longest idle first); MaxConnsPerIP bounds those
	// of one client address.
	MaxConns      int
	MaxConnsPerIP int
	// Auth verifies the bearer tokens that creating auctions, bidding and
	// operator routes need. Nil accepts no token: those routes answer 401.
	Auth Authenticator
	// AuthOff skips authentication: every caller may do anything, as the
	// user the request body names (development only).
	AuthOff bool
	// AuthFailureRate (per second) and AuthFailureBurst bound failed
	// authentications per client address; beyond them the address gets 429.
	AuthFailureRate  float64
	AuthFailureBurst int
	// OpsOnly serves only /healthz, /readyz and /metrics: for processes that
	// run other roles than the gateway.
	OpsOnly bool

	// NodeID names this node in the X-Bidgate-Node header of bid answers.
	NodeID string
	// Cluster, when set, places auctions on nodes: a bid for an auction
	// another node owns is forwarded to that node's internal endpoint,
	// signed with ClusterSecret. ClusterSecretPrevious, during a rotation,
	// is accepted too (forwarded bids and answers), never used to sign.
	Cluster               Cluster
	ClusterSecret         []byte
	ClusterSecretPrevious []byte
	ForwardTimeout        time.Duration // budget of one forwarded bid's round trip

	// Viewers, when set, serves WS /ws/auctions/{id} on every node.
	Viewers Viewers
	// Inbox, when set, serves WS /ws/me: a user's notices, live.
	Inbox Inbox
	// Reads, when set, answers GET /auctions/{id} (the node's read cache);
	// nil reads the Auctions.
	Reads Reader
}

// DefaultConfig is the one statement of the gateway defaults: New fills a
// zero field from it, and the command line's flags take theirs from it.
func DefaultConfig() Config {
	return Config{
		Listen:           ":8080",
		InternalListen:   "127.0.0.1:8081",
		AdminListen:      "127.0.0.1:9090",
		ShutdownTimeout:  15 * time.Second,
		MaxBodyBytes:     64 << 10,
		RequestTimeout:   5 * time.Second,
		ReadTimeout:      10 * time.Second,
		WriteTimeout:     10 * time.Second,
		IdleTimeout:      60 * time.Second,
		MaxConns:         10000,
		MaxConnsPerIP:    1024,
		AuthFailureRate:  20,
		AuthFailureBurst: 40,
		ForwardTimeout:   2 * time.Second,
	}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, d.MaxBodyBytes)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, d.RequestTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, d.ReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, d.WriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, d.IdleTimeout)
	c.MaxConns = cmp.Or(c.MaxConns, d.MaxConns)
	c.MaxConnsPerIP = cmp.Or(c.MaxConnsPerIP, d.MaxConnsPerIP)
	c.AuthFailureRate = cmp.Or(c.AuthFailureRate, d.AuthFailureRate)
	c.AuthFailureBurst = cmp.Or(c.AuthFailureBurst, d.AuthFailureBurst)
	c.ForwardTimeout = cmp.Or(c.ForwardTimeout, d.ForwardTimeout)
	return c
}

// Validate reports the values the server cannot run with: every size,
// count, rate and time is positive, or zero for its default.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"ShutdownTimeout", c.ShutdownTimeout < 0},
		{"MaxBodyBytes", c.MaxBodyBytes < 0},
		{"RequestTimeout", c.RequestTimeout < 0},
		{"ReadTimeout", c.ReadTimeout < 0},
		{"WriteTimeout", c.WriteTimeout < 0},
		{"IdleTimeout", c.IdleTimeout < 0},
		{"MaxConns", c.MaxConns < 0},
		{"MaxConnsPerIP", c.MaxConnsPerIP < 0},
		{"AuthFailureRate", c.AuthFailureRate < 0},
		{"AuthFailureBurst", c.AuthFailureBurst < 0},
		{"ForwardTimeout", c.ForwardTimeout < 0},
	} {
		if f.negative {
			errs = append(errs, fmt.Errorf("gateway: %s is negative", f.name))
		}
	}
	return errors.Join(errs...)
}
