package ring

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"

	"github.com/buraksezer/consistent"
	"github.com/hashicorp/memberlist"
)

// Limits of the ring's shape. consistent rebuilds every partition's owner on
// each membership change and Owner keeps one index per partition, so
// PartitionCount is kept to a size that rebuilds in well under a millisecond.
const (
	maxPartitions  = 1 << 16
	maxReplication = 1 << 10
	maxNodeIDLen   = 64
)

// Config says who this node is and how to reach the cluster. Zero values
// take DefaultConfig's, except BindPort (see DefaultConfig).
type Config struct {
	NodeID        string   // required: the operator's stable id, letters, digits, '.', '_' and '-'
	BindAddr      string   // IP to gossip on (UDP and TCP)
	BindPort      int      // port to gossip on; 0 picks a free port
	AdvertiseAddr string   // IP the others reach this node at; empty: BindAddr (0.0.0.0: a private IP of this host)
	AdvertisePort int      // port the others reach this node at; 0: the bound port
	Seeds         []string // host:port of members to join; empty starts a new cluster
	SecretKey     []byte   // gossip encryption key (AES, 16, 24 or 32 bytes), nil for none

	// ClusterSecret makes this node's join proof and checks the others':
	// a member is on this node's ownership ring only once its gossiped
	// metadata proves it holds the secret (see prover). Nil (development)
	// admits every member unproven, and none is Verified.
	ClusterSecret []byte
	// ClusterSecretPrevious is also accepted from the others during a
	// rotation of the secret; it never signs.
	ClusterSecretPrevious []byte

	InternalAddr string   // host:port of this node's internal HTTP endpoint, gossiped to the others
	PublicAddr   string   // host:port of this node's public HTTP API, gossiped to the others
	Roles        []string // roles this node runs; only "shard" puts it on the ownership ring

	PartitionCount    int     // consistent partitions (a prime spreads ids evenly), at most 65536
	ReplicationFactor int     // virtual nodes per shard member, at most 1024
	Load              float64 // consistent's load bound; must be > 1.0 (below 1.0 consistent panics: no member has room)

	Log *slog.Logger // memberlist's own log goes to it at debug level

	// OnChange, if set, is called after every membership change, once the
	// owner table includes it. It runs on the ring's own goroutine (never
	// inside memberlist), one call at a time; a slow OnChange delays the
	// next owner table, so hand long work to another goroutine. It must not
	// call Leave or Shutdown (they wait for that goroutine to end).
	OnChange func(Change)

	// tune, if set (tests only), adjusts the memberlist configuration
	// before it is used: tests give each cluster its own Label so that a
	// port reused by a parallel test never merges two test clusters.
	tune func(*memberlist.Config)
}

// DefaultConfig is the one statement of the ring defaults: Join fills a
// zero field from it, and the command line's flags take theirs from it.
// BindPort is the exception: Join keeps a zero BindPort, which asks for a
// free port (what tests and embedded uses want); the command line gossips
// on memberlist's usual port.
func DefaultConfig() Config {
	return Config{
		BindAddr:          "127.0.0.1",
		BindPort:          memberlist.DefaultLANConfig().BindPort,
		PartitionCount:    consistent.DefaultPartitionCount,
		ReplicationFactor: consistent.DefaultReplicationFactor,
		Load:              consistent.DefaultLoad,
		Log:               slog.Default(),
	}
}

// withDefaults returns c with every zero field but BindPort taken from
// DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.BindAddr = cmp.Or(c.BindAddr, d.BindAddr)
	c.PartitionCount = cmp.Or(c.PartitionCount, d.PartitionCount)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, d.ReplicationFactor)
	c.Load = cmp.Or(c.Load, d.Load)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// withAdvertised returns c with the address and port the others reach this
// node at filled in where memberlist would not choose them itself. c is
// valid.
func (c Config) withAdvertised() Config {
	if c.AdvertiseAddr == "" && !net.ParseIP(c.BindAddr).Equal(net.IPv4zero) {
		c.AdvertiseAddr = c.BindAddr
	}
	if c.AdvertiseAddr != "" && c.AdvertisePort == 0 {
		// With an explicit address memberlist would advertise port 0; with
		// BindPort 0 it fills the chosen port in itself.
		c.AdvertisePort = c.BindPort
	}
	return c
}

// Change is one membership change.
type Change struct {
	Kind   string // "join", "leave", "update" (new metadata) or "reject" (see Ring.Reject)
	Member Member // the member as it is after the change
}

// Kinds of Change.
const (
	KindJoin   = "join"
	KindLeave  = "leave"
	KindUpdate = "update"
	KindReject = "reject"
)

// Validate checks everything that would make memberlist or consistent
// fail or panic later, so that a bad configuration is an error from Join,
// never a panic on some membership event. Join checks c with its defaults
// in.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if err := checkNodeID(c.NodeID); err != nil {
		errs = append(errs, err)
	}
	bind := net.ParseIP(c.BindAddr)
	if bind == nil {
		bad("BindAddr %q is not an IP address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > math.MaxUint16 {
		bad("BindPort %d is out of range", c.BindPort)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > math.MaxUint16 {
		bad("AdvertisePort %d is out of range", c.AdvertisePort)
	}
	switch {
	case c.AdvertiseAddr != "":
		if net.ParseIP(c.AdvertiseAddr) == nil {
			bad("AdvertiseAddr %q is not an IP address", c.AdvertiseAddr)
		}
	case bind != nil && bind.Equal(net.IPv4zero):
		// memberlist advertises a private IP of this host.
	case bind != nil && bind.IsUnspecified():
		bad("BindAddr %s needs an AdvertiseAddr", c.BindAddr)
	}
	for _, s := range c.Seeds {
		if s == "" {
			bad("Seeds has an empty address")
		}
	}
	if len(c.ClusterSecretPrevious) > 0 && len(c.ClusterSecret) == 0 {
		bad("ClusterSecretPrevious needs a ClusterSecret")
	}
	if c.SecretKey != nil {
		if err := memberlist.ValidateKey(c.SecretKey); err != nil {
			bad("SecretKey: %v (got %d bytes)", err, len(c.SecretKey))
		}
	}
	for _, a := range []struct{ name, addr string }{{"InternalAddr", c.InternalAddr}, {"PublicAddr", c.PublicAddr}} {
		if a.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			bad("%s %q is not host:port: %v", a.name, a.addr, err)
		} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > math.MaxUint16 {
			bad("%s %q has a bad port", a.name, a.addr)
		}
	}
	for _, r := range c.Roles {
		if r == "" {
			bad("Roles has an empty role")
		}
	}
	if c.PartitionCount < 1 || c.PartitionCount > maxPartitions {
		bad("PartitionCount %d is out of range [1, %d]", c.PartitionCount, maxPartitions)
	}
	if c.ReplicationFactor < 1 || c.ReplicationFactor > maxReplication {
		bad("ReplicationFactor %d is out of range [1, %d]", c.ReplicationFactor, maxReplication)
	}
	// consistent gives each member at most ceil(partitions/members*Load)
	// partitions. Below 1.0 the members together may lack room for all of
	// them and consistent panics ("not enough room to distribute
	// partitions"); exactly 1.0 fits but leaves no slack, so the bound is
	// required to be above it.
	if math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load <= 1.0 {
		bad("Load %v must be a number greater than 1.0", c.Load)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ring: bad config: %w", err)
	}
	return nil
}

func checkNodeID(id string) error {
	if id == "" {
		return errors.New("NodeID is required")
	}
	if len(id) > maxNodeIDLen {
		return fmt.Errorf("NodeID is %d bytes, at most %d", len(id), maxNodeIDLen)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("NodeID %q may only hold letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}
