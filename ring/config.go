package ring

import (
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
// take the defaults given on each field.
type Config struct {
	NodeID        string   // required: the operator's stable id, letters, digits, '.', '_' and '-'
	BindAddr      string   // IP to gossip on (UDP and TCP); default "127.0.0.1"
	BindPort      int      // 0 picks a free port
	AdvertiseAddr string   // IP the others reach this node at; default BindAddr (0.0.0.0: a private IP of this host)
	AdvertisePort int      // default the bound port
	Seeds         []string // host:port of members to join; empty starts a new cluster
	SecretKey     []byte   // gossip encryption key (AES, 16, 24 or 32 bytes), nil for none

	InternalAddr string   // host:port of this node's internal HTTP endpoint, gossiped to the others
	PublicAddr   string   // host:port of this node's public HTTP API, gossiped to the others
	Roles        []string // roles this node runs; only "shard" puts it on the ownership ring

	PartitionCount    int     // consistent partitions, default 271 (a prime spreads ids evenly), at most 65536
	ReplicationFactor int     // virtual nodes per shard member, default 20, at most 1024
	Load              float64 // consistent's load bound, default 1.25; must be > 1.0 (below 1.0 consistent panics: no member has room)

	Log *slog.Logger // default slog.Default(); memberlist's own log goes to it at debug level

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

// Change is one membership change.
type Change struct {
	Kind   string // "join", "leave" or "update" (new metadata)
	Member Member // the member as it is after the change
}

// Kinds of Change.
const (
	KindJoin   = "join"
	KindLeave  = "leave"
	KindUpdate = "update"
)

// withDefaults fills the defaults in and checks everything that would make
// memberlist or consistent fail or panic later, so that a bad configuration
// is an error from Join, never a panic on some membership event.
func (c Config) withDefaults() (Config, error) {
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1"
	}
	if c.PartitionCount == 0 {
		c.PartitionCount = consistent.DefaultPartitionCount
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = consistent.DefaultReplicationFactor
	}
	if c.Load == 0 {
		c.Load = consistent.DefaultLoad
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}

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
	default:
		c.AdvertiseAddr = c.BindAddr
	}
	if c.AdvertiseAddr != "" && c.AdvertisePort == 0 {
		// With an explicit address memberlist would advertise port 0; with
		// BindPort 0 it fills the chosen port in itself.
		c.AdvertisePort = c.BindPort
	}
	for _, s := range c.Seeds {
		if s == "" {
			bad("Seeds has an empty address")
		}
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
		return c, fmt.Errorf("ring: bad config: %w", err)
	}
	return c, nil
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
