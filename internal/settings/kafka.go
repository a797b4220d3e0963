package settings

import (
	"errors"
	"fmt"
	"strings"

	"bidgate/persist/kafka"
)

// Kafka is how a node reaches Kafka, the topics it creates there and the
// consumer group of its persisters. Without brokers the node starts an
// embedded broker of its own.
type Kafka struct {
	Brokers string // comma-separated host:port; empty: an embedded broker on loopback
	kafka.Config
	TLS   bool
	TLSCA string // PEM file of the CA the brokers' certificates chain to; implies TLS
	SASL  kafka.SASLConfig
}

// Register adds every Kafka flag of a node (--kafka, --kafka-*,
// --persister-group) and their checks.
func (k *Kafka) Register(fs *FlagSet) {
	d := kafka.DefaultConfig()
	fs.StringVar(&k.Brokers, "kafka", "", "Kafka brokers, comma-separated; empty starts an embedded broker on loopback")
	fs.IntVar(&k.EmbeddedPort, "kafka-embedded-port", d.EmbeddedPort, "port of the embedded Kafka broker (0: any free port)")
	fs.IntVar(&k.Partitions, "kafka-partitions", d.Partitions, "partitions of the topics bidgate creates")
	fs.IntVar(&k.Replication, "kafka-replication", d.Replication, "replication factor of the topics bidgate creates on a real cluster")
	fs.StringVar(&k.PersisterGroup, "persister-group", d.PersisterGroup, "Kafka consumer group of the persisters")
	fs.StringVar(&k.NotifierGroup, "notifier-group", d.NotifierGroup, "Kafka consumer group of the notifiers")
	fs.BoolVar(&k.TLS, "kafka-tls", false, "connect to Kafka over TLS")
	fs.StringVar(&k.TLSCA, "kafka-tls-ca", "", "PEM file of the CA the Kafka brokers' certificates chain to (implies --kafka-tls; empty: the system's roots)")
	fs.StringVar(&k.SASL.Mechanism, "kafka-sasl-mechanism", "", "Kafka SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&k.SASL.Username, "kafka-sasl-username", "", "Kafka SASL user")
	fs.StringVar(&k.SASL.Password, "kafka-sasl-password", "", "Kafka SASL password (prefer "+EnvName("kafka-sasl-password")+")")
	fs.Check(func() error { return k.Config.Validate() },
		map[string]string{"Partitions": "kafka-partitions", "EmbeddedPort": "kafka-embedded-port"})
	fs.Check(k.checkSecurity, nil)
}

// checkSecurity checks the TLS and SASL settings, which only a Kafka
// cluster takes.
func (k *Kafka) checkSecurity() error {
	if _, err := k.Security(); err != nil {
		return err
	}
	if k.Brokers == "" && (k.TLS || k.TLSCA != "" || k.SASL != (kafka.SASLConfig{})) {
		return errors.New("--kafka-tls and --kafka-sasl-* are for a Kafka cluster (--kafka); the embedded broker is plaintext on loopback")
	}
	return nil
}

// BrokerList is the brokers of --kafka; nil when there are none.
func (k Kafka) BrokerList() []string {
	if k.Brokers == "" {
		return nil
	}
	return strings.Split(k.Brokers, ",")
}

// Security is how to reach the brokers, with the CA file read.
func (k Kafka) Security() (kafka.Security, error) {
	t, err := clientTLS(k.TLS, k.TLSCA)
	if err != nil {
		return kafka.Security{}, fmt.Errorf("--kafka-tls-ca: %w", err)
	}
	return kafka.NewSecurity(t, k.SASL)
}

// Broker is the embedded Kafka broker run as a process of its own (bidgate
// broker, and the one bidgate dev starts for its nodes): its loopback port
// and the partitions of its topics.
type Broker struct {
	Port       int
	Partitions int
}

// Register adds the broker's two flags, under the names the command has
// always given them, and their check.
func (b *Broker) Register(fs *FlagSet, portFlag, partitionsFlag string) {
	d := kafka.DefaultConfig()
	fs.IntVar(&b.Port, portFlag, d.StandalonePort, "port of the embedded Kafka broker on 127.0.0.1")
	fs.IntVar(&b.Partitions, partitionsFlag, d.Partitions, "partitions of bidgate's topics")
	fs.Check(func() error { return kafka.Config{StandalonePort: b.Port, Partitions: b.Partitions}.Validate() },
		map[string]string{"StandalonePort": portFlag, "Partitions": partitionsFlag})
}
