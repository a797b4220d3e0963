// Command bidgate runs the auction backend.
//
//	bidgate serve     run the HTTP API (migrating the database first)
//	bidgate migrate   apply database migrations and exit
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
  serve     run the HTTP API (applies migrations first unless --migrate=false)
  migrate   apply database migrations and exit

Run "bidgate <command> -h" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var run func(context.Context, config) error
	switch cmd := os.Args[1]; cmd {
	case "serve":
		run = serve
	case "migrate":
		run = migrate
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "bidgate: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	cfg, err := parseConfig(os.Args[1], os.Args[2:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bidgate:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bidgate:", err)
		os.Exit(1)
	}
}
