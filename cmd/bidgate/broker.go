package main

import (
	"context"

	"bidgate"
	"bidgate/internal/settings"
	"bidgate/persist/kafka"
)

// brokerConfig is `bidgate broker`: the embedded Kafka-protocol broker as a
// process of its own, so that nodes and the broker restart independently.
type brokerConfig struct {
	Broker settings.Broker
	Log    settings.Log
}

func parseBrokerConfig(args []string) (brokerConfig, error) {
	var c brokerConfig
	fs := settings.NewFlagSet("bidgate broker")
	c.Broker.Register(fs, "port", "partitions")
	c.Log.Register(fs)
	err := fs.Parse(args)
	return c, err
}

// broker runs the embedded broker until ctx ends. It keeps messages in
// memory only: every start is a new, empty broker with bidgate's topics, and
// the pipeline is built not to need what a restarted broker forgot.
func broker(ctx context.Context, c brokerConfig) error {
	log, err := c.Log.Logger()
	if err != nil {
		return err
	}
	b, err := kafka.StartEmbedded(c.Broker.Port, c.Broker.Partitions)
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("embedded Kafka broker listening (messages in memory only)", "addr", b.Addrs()[0],
		"topics", bidgate.Topics, "partitions", c.Broker.Partitions)
	<-ctx.Done()
	log.Info("embedded Kafka broker stopping")
	return nil
}
