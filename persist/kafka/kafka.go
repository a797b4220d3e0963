// Package kafka connects bidgate to Kafka: the topics, writers and readers
// configured the way the relays and the persister need them, and an embedded
// Kafka-protocol broker for running without a Kafka cluster.
package kafka

import (
	"bidgate"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Embedded is an in-process Kafka-protocol broker on a loopback port. It
// keeps messages in memory: a restart forgets them, which the relays allow
// for (see persist.Relay).
type Embedded struct {
	cluster *kfake.Cluster
}

// StartEmbedded starts a one-broker cluster on 127.0.0.1:port (0 picks a
// free port) with bidgate's topics.
func StartEmbedded(port, partitions int) (*Embedded, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DefaultNumPartitions(partitions),
		kfake.SeedTopics(int32(partitions), bidgate.Topics...),
	)
	if err != nil {
		return nil, fmt.Errorf("start embedded Kafka broker: %w", err)
	}
	return &Embedded{cluster: c}, nil
}

// Addrs are the broker's addresses.
func (e *Embedded) Addrs() []string { return e.cluster.ListenAddrs() }

// Close stops the broker.
func (e *Embedded) Close() { e.cluster.Close() }

// EnsureTopics creates the topics that do not exist yet.
func EnsureTopics(ctx context.Context, brokers []string, sec Security, partitions, replication int) error {
	d := sec.dialer()
	conn, err := d.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		return fmt.Errorf("connect to Kafka at %s: %w", brokers[0], err)
	}
	defer conn.Close()
	controller, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("find the Kafka controller: %w", err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		return fmt.Errorf("connect to the Kafka controller: %w", err)
	}
	defer cc.Close()
	configs := make([]kafka.TopicConfig, len(bidgate.Topics))
	for i, t := range bidgate.Topics {
		configs[i] = kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: replication}
	}
	err = cc.CreateTopics(configs...)
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topics: %w", err)
	}
	return nil
}

// NewWriter returns a writer that waits for every in-sync replica and puts
// messages of one key on one partition. Hand it whole batches: a call with
// one message waits out BatchTimeout. BatchSize is small because the writer
// allocates (and zeroes) room for that many messages per partition per
// call: at 1,000 a relay's pass of a few notices cost a megabyte.
func NewWriter(brokers []string, topic string, sec Security) *kafka.Writer {
	return &kafka.Writer{
		Transport:    sec.transport(),
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    writerBatchSize,
		BatchBytes:   16 << 20,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
		MaxAttempts:  3,
	}
}

// writerBatchSize caps the messages of one produce request per partition; a
// larger call is written as several requests.
const writerBatchSize = 100

// NewReader returns a consumer-group reader that commits only when told.
// The session timeout is the embedded broker's minimum. MaxWait is also
// the deadline for a fetch's answer to begin (kafka-go): at 50 ms a
// partition with a backlog whose answer took longer to build was fetched
// again and again and never read, so it is 500 ms; MinBytes 1 still
// answers as soon as a message is there, and Close waits at most that.
func NewReader(brokers []string, topic, group string, sec Security) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Dialer:            sec.dialer(),
		Brokers:           brokers,
		Topic:             topic,
		GroupID:           group,
		MinBytes:          1,
		MaxBytes:          16 << 20,
		MaxWait:           500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: time.Second,
		RebalanceTimeout:  6 * time.Second,
		CommitInterval:    0, // synchronous CommitMessages after each batch
		StartOffset:       kafka.FirstOffset,
	})
}
