// Command docscheck keeps bidgate's documentation true (make docs-check).
//
// It reads README.md, docs/*.md and deploy/README.md and checks that every
// path, test, metric and link they name exists, that every flag and
// BIDGATE_ variable they name is one of the binaries', and that README.md
// stays an entry of at most 250 lines. Then it starts a fresh local cluster
// (bidgate dev --nodes 3) behind proxies that check every answer against
// the OpenAPI documents, awaits every node's /readyz, and runs each
// page's shell blocks marked runnable (a fence whose info string is
// "sh runnable") in order, in one bash -euo pipefail session per page, from
// the repository root: a block may set a variable that the next one uses.
// Each block checks what it shows, so a drifting API fails it. It stops the
// cluster whatever happens (SIGTERM, then waits).
//
// Run it from the repository root once bin/bidgate and bin/bidbench are
// built and the database exists: make docs-check does all of it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"
)

func main() {
	var c config
	flag.StringVar(&c.Bidgate, "bidgate", "bin/bidgate", "the bidgate binary to run and read the flags of")
	flag.StringVar(&c.Bidbench, "bidbench", "bin/bidbench", "the bidbench binary to read the flags of")
	flag.StringVar(&c.Log, "log", "bin/docs-check-cluster.log", "file the cluster's output goes to")
	flag.IntVar(&c.Nodes, "nodes", 3, "nodes of the cluster the examples run against")
	flag.DurationVar(&c.ReadyTimeout, "ready-timeout", time.Minute, "how long the cluster may take to answer /readyz on every node")
	flag.DurationVar(&c.PageTimeout, "page-timeout", 3*time.Minute, "how long one page's examples may run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "docs-check:", err)
		os.Exit(1)
	}
}

type config struct {
	Bidgate, Bidbench string
	Log               string
	Nodes             int
	ReadyTimeout      time.Duration
	PageTimeout       time.Duration
}

// run checks the pages under the working directory.
func run(ctx context.Context, c config) error {
	pages, err := readPages(".")
	if err != nil {
		return err
	}
	r, err := loadRepo(".")
	if err != nil {
		return err
	}
	fl, err := binaryFlags(ctx, c.Bidgate, c.Bidbench)
	if err != nil {
		return err
	}
	problems := append(checkStatic(pages, r), checkCommandLine(pages, r, fl)...)
	problems = append(problems, checkRunnable(pages)...)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		return fmt.Errorf("%d statements of the documentation do not hold", len(problems))
	}
	fmt.Printf("docs-check: every path, test, metric, link, flag and variable the %d pages name exists\n", len(pages))

	sessions, err := runnableSessions(pages)
	if err != nil {
		return err
	}
	total := 0
	for _, s := range sessions {
		total += len(s.Blocks)
	}
	cc, err := startContractCheck(c.Nodes)
	if err != nil {
		return err
	}
	cluster, err := startCluster(ctx, c.Bidgate, c.Nodes, c.Log)
	if err != nil {
		return errors.Join(err, cc.stop(ctx))
	}
	err = cluster.awaitReady(ctx, c.ReadyTimeout)
	if err == nil {
		fmt.Printf("docs-check: %d nodes ready (log: %s), each answer checked against the OpenAPI documents; running %d runnable blocks of %d pages\n",
			c.Nodes, c.Log, total, len(sessions))
		err = runSessions(ctx, sessions, c.PageTimeout, cc)
	}
	if err := errors.Join(err, cluster.stop(), cc.stop(ctx)); err != nil {
		return err
	}
	fmt.Printf("docs-check: passed: %d runnable blocks of %d pages, %d answers as the OpenAPI documents describe them; the cluster has stopped\n",
		total, len(sessions), cc.checked.Load())
	return nil
}

// runSessions runs every page's session and reports the failed ones.
// A page fails too when an answer its examples provoked is not one the
// OpenAPI documents describe.
func runSessions(ctx context.Context, sessions []session, timeout time.Duration, cc *contractCheck) error {
	failed := 0
	for _, s := range sessions {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted before %s: %w", s.Page, ctx.Err())
		}
		err := s.run(ctx, timeout)
		if v := cc.take(); len(v) > 0 {
			err = errors.Join(err, fmt.Errorf("%s: %d answers the OpenAPI documents do not describe, the first: %s", s.Page, len(v), v[0]))
		}
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "docs-check: FAIL %v\n", err)
			continue
		}
		fmt.Printf("docs-check: ok   %s, runnable blocks: %d\n", s.Page, len(s.Blocks))
	}
	if failed > 0 {
		return fmt.Errorf("the runnable blocks of %d of %d pages failed (see FAIL above)", failed, len(sessions))
	}
	return nil
}

var (
	// A command or scenario in a usage text: two spaces, its name, two or more spaces.
	usageCommand = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)  +`)
	// A flag in the output of a flag set's -h, with the lines of its usage.
	usageFlag = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)[^\n]*\n((?:    [^\n]*(?:\n|$))*)`)
	// The default at the end of a flag's usage; the flag package prints none for a zero value.
	usageDefault = regexp.MustCompile(`\(default (.*)\)\s*$`)
)

// binaryFlags returns the flags of every command of bidgate and every
// scenario of bidbench, as their -h prints them, each with the defaults it
// has in the commands that take it ("" for a zero value).
func binaryFlags(ctx context.Context, bins ...string) (flags, error) {
	out := flags{}
	for _, bin := range bins {
		usage, err := helpOf(ctx, bin)
		if err != nil {
			return nil, err
		}
		commands := usageCommand.FindAllStringSubmatch(usage, -1)
		if len(commands) == 0 {
			return nil, fmt.Errorf("%s -h lists no command", bin)
		}
		for _, cmd := range commands {
			help, err := helpOf(ctx, bin, cmd[1])
			if err != nil {
				return nil, err
			}
			for _, f := range usageFlag.FindAllStringSubmatch(help, -1) {
				def := ""
				if m := usageDefault.FindStringSubmatch(strings.TrimSpace(f[2])); m != nil {
					def = strings.Trim(m[1], `"`)
				}
				out[f[1]] = append(out[f[1]], def)
			}
		}
	}
	if len(out) < 50 {
		return nil, fmt.Errorf("found only %d flags in the binaries' help: has its form changed?", len(out))
	}
	return out, nil
}

// helpOf runs bin with args and -h and returns what it printed.
func helpOf(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, append(args, "-h")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %v -h: %w\n%s", bin, args, err, out)
	}
	return string(out), nil
}
