// Command bidgate runs the auction backend.
//
//	bidgate serve     run a node (migrating the database first)
//	bidgate dev       run a local cluster of nodes and an embedded Kafka broker
//	bidgate migrate   apply database migrations and exit
//	bidgate broker    run the embedded Kafka-protocol broker on its own
//	bidgate token     print a bearer token signed with the dev key
//	bidgate event-key print the public key of an event-signing key, or a new key
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: bidgate <command> [flags]

commands:
  serve     run a node: the HTTP API and the roles of --roles (applies migrations first)
  dev       run a local cluster of --nodes node processes (default 3) and an embedded Kafka broker
  migrate   apply database migrations and exit
  broker    run the embedded Kafka-protocol broker (messages in memory) as a process of its own
  token     print a bearer token the dev cluster accepts: bidgate token --sub 42 --scope bid
  event-key print the public key of BIDGATE_EVENT_SIGNING_KEY (what consumers verify with), or make a new key

Run "bidgate <command> -h" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var run func() error
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve", "migrate":
		var cfg config
		cfg, err = parseConfig(cmd, args)
		run = func() error {
			if cmd == "serve" {
				return serve(ctx, cfg)
			}
			return migrate(ctx, cfg)
		}
	case "broker":
		var cfg brokerConfig
		cfg, err = parseBrokerConfig(args)
		run = func() error { return broker(ctx, cfg) }
	case "token":
		var cfg tokenConfig
		cfg, err = parseTokenConfig(args)
		run = func() error { return printToken(os.Stdout, cfg) }
	case "event-key":
		var cfg eventKeyConfig
		cfg, err = parseEventKeyConfig(args)
		run = func() error { return printEventKey(os.Stdout, cfg) }
	case "dev":
		var cfg devConfig
		cfg, err = parseDevConfig(args)
		run = func() error { return dev(ctx, cfg) }
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "bidgate: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bidgate:", err)
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bidgate:", err)
		os.Exit(1)
	}
}
