package kafka

import (
	"errors"
	"fmt"
	"math"
)

// Config is the shape of the topics bidgate creates, the consumer group of
// its persisters, and the ports of the embedded broker.
type Config struct {
	Partitions  int // partitions of each topic bidgate creates (bidgate.Topics), at most MaxPartitions
	Replication int // replication factor of those topics on a Kafka cluster
	// PersisterGroup is the consumer group the persisters share the
	// bid-accepted partitions in.
	PersisterGroup string
	// NotifierGroup is the consumer group the notifiers share the
	// partitions of bid-notifications in.
	NotifierGroup string
	// EmbeddedPort is the loopback port of the broker a node starts when
	// it is given no Kafka cluster; 0 picks a free one.
	EmbeddedPort int
	// StandalonePort is the loopback port of the broker run as a process of
	// its own (bidgate broker, which bidgate dev starts for its nodes):
	// Kafka's usual port, where the nodes are told to find it.
	StandalonePort int
}

// MaxPartitions bounds Config.Partitions.
const MaxPartitions = 1024

// DefaultConfig is the one statement of the Kafka defaults: the command
// line's flags take theirs from it.
func DefaultConfig() Config {
	return Config{Partitions: 8, Replication: 1, PersisterGroup: "bidgate-persister", NotifierGroup: "bidgate-notifier", EmbeddedPort: 0, StandalonePort: 9092}
}

// Validate reports topics bidgate cannot create and ports no broker can
// listen on.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		bad("Partitions must be from 1 to %d, got %d", MaxPartitions, c.Partitions)
	}
	for _, p := range []struct {
		name string
		port int
	}{{"EmbeddedPort", c.EmbeddedPort}, {"StandalonePort", c.StandalonePort}} {
		if p.port < 0 || p.port > math.MaxUint16 {
			bad("%s must be a port number, got %d", p.name, p.port)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}
