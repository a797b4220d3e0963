package main

import (
	"bidgate"
	"context"
	"flag"
	"fmt"

	"bidgate/persist/kafka"
)

// brokerConfig is `bidgate broker`: the embedded Kafka-protocol broker as a
// process of its own, so that nodes and the broker restart independently.
type brokerConfig struct {
	Port       int
	Partitions int
	LogLevel   string
	LogFormat  string
}

func parseBrokerConfig(args []string) (brokerConfig, error) {
	var c brokerConfig
	fs := flag.NewFlagSet("bidgate broker", flag.ContinueOnError)
	fs.IntVar(&c.Port, "port", 9092, "port on 127.0.0.1 (0: any free port, logged)")
	fs.IntVar(&c.Partitions, "partitions", 8, "partitions of bid-accepted and auction-closed")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.Port < 0 || c.Port > 65535 {
		return c, fmt.Errorf("--port must be a port number, got %d", c.Port)
	}
	if c.Partitions < 1 || c.Partitions > 1024 {
		return c, fmt.Errorf("--partitions must be from 1 to 1024, got %d", c.Partitions)
	}
	return c, nil
}

// broker runs the embedded broker until ctx ends. It keeps messages in
// memory only: every start is a new, empty broker with bidgate's topics, and
// the pipeline is built not to need what a restarted broker forgot.
func broker(ctx context.Context, c brokerConfig) error {
	log, err := config{LogLevel: c.LogLevel, LogFormat: c.LogFormat}.logger()
	if err != nil {
		return err
	}
	b, err := kafka.StartEmbedded(c.Port, c.Partitions)
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("embedded Kafka broker listening (messages in memory only)", "addr", b.Addrs()[0],
		"topics", bidgate.Topics, "partitions", c.Partitions)
	<-ctx.Done()
	log.Info("embedded Kafka broker stopping")
	return nil
}
