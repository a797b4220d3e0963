//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"bidgate/bench"
)

var (
	// bin is the bidgate binary built from this checkout by TestMain.
	bin string
	// results is bench-results/chaos-<timestamp>: each scenario's bench
	// result, and the logs of the failed ones.
	results string
	// rows are the finished scenarios, for the table TestMain prints.
	rows []row
)

// TestMain builds bidgate once, runs the scenarios and prints the table.
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "bidgate-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "bidgate")
	clusterScript = filepath.Join(root, "internal", "testredis", "redis-cluster.sh")
	started := time.Now()
	if err := runOnce(context.Background(), filepath.Join(tmp, "build.log"), nil, root, os.Environ(),
		"go", "build", "-o", bin, "./cmd/bidgate"); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: build bidgate:", err)
		return 1
	}
	fmt.Printf("chaos: built %s in %s\n", bin, time.Since(started).Round(100*time.Millisecond))
	stamp := time.Now().Format("20060102-150405")
	results = filepath.Join(root, "bench-results", "chaos-"+stamp)

	code := m.Run()
	if len(rows) == 0 {
		return code
	}
	var table bytes.Buffer
	if err := writeTable(&table, rows); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	fmt.Printf("\n=== chaos summary (%s)\n%s", stamp, table.String())
	out := filepath.Join(root, "bench-results", "chaos-"+stamp+".txt")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	if err := os.WriteFile(out, table.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	fmt.Printf("chaos: table written to %s\n", out)
	return code
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// selected reports whether CHAOS_SCENARIOS (comma-separated names; empty:
// all) names the scenario.
func selected(name string) bool {
	list := os.Getenv("CHAOS_SCENARIOS")
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

// TestChaos runs each scenario on a fresh stack, one at a time.
func TestChaos(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if !selected(sc.name) {
				t.Skip("not in CHAOS_SCENARIOS")
			}
			runScenario(t, sc)
		})
	}
}

// runScenario starts a stack, runs the load with the fault, and fails the
// test on anything the summary counts as a failure.
func runScenario(t *testing.T, sc scenario) {
	// The longest scenario takes about two and a half minutes; the bound
	// is there for a hung process, not for a slow one.
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Printf("[%s %s] %s\n", time.Now().Format("15:04:05"), sc.name, fmt.Sprintf(format, args...))
	}
	started := time.Now()
	s, err := newStack(ctx, bin, 3, sc.redis, logf)
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	logf("stack up in %s (%s): postgres :%d, redis %s, broker %s, nodes %s", time.Since(started).Round(100*time.Millisecond),
		s.dir, s.pg.port, s.redisAddr(), s.brokerAddr(), s.targets())
	keep := os.Getenv("CHAOS_KEEP") != ""
	defer func() {
		if err := s.close(context.WithoutCancel(ctx), keep); err != nil {
			t.Errorf("%v", err)
		}
	}()

	o := runLoad(ctx, s, sc, logf)
	r := summarize(o, time.Since(started))
	rows = append(rows, r)
	if o.res != nil {
		if err := saveResult(o.res, filepath.Join(results, sc.name)); err != nil {
			t.Errorf("%v", err)
		}
	}
	logf("%s: %d 201s, missing %s, duplicates %s, wrong winners %s, degraded %ds, errors: %s", sc.name, r.created,
		count(r.missing), count(r.duplicates), count(r.wrongWinners), r.degraded, r.errors)
	logf("timeline: %s", r.timeline)
	for _, what := range r.reported {
		logf("REPORTED: %s", what)
	}
	if r.pass {
		return
	}
	for _, why := range r.reasons {
		t.Errorf("%s", why)
	}
	logs := filepath.Join(results, sc.name+"-logs")
	if err := s.copyLogs(logs); err != nil {
		t.Errorf("%v", err)
	}
	t.Logf("logs copied to %s; their ends:\n%s", logs, s.tails(30))
}

// saveResult writes the bench's result as JSON and its records as gzipped
// JSON lines (no HTML report: rendering its charts costs CPU the next
// scenario needs).
func saveResult(res *bench.Result, base string) error {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	res.Files = bench.Files{JSON: base + ".json", Records: base + ".records.jsonl.gz"}
	if err := bench.WriteRecords(res.Files.Records, res.Records()); err != nil {
		return fmt.Errorf("write records: %w", err)
	}
	if err := bench.WriteJSON(res.Files.JSON, res); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
