package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/persist/pgtest"
)

// TestMain lets a test run this test binary as bidgate itself, a real OS
// process: BIDGATE_AS_MAIN=1 makes it main().
func TestMain(m *testing.M) {
	if os.Getenv("BIDGATE_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is a bidgate process started by a test, its stderr read line by
// line.
type process struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error // its exit, once stderr is read to the end
}

func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BIDGATE_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		defer close(p.lines)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			select {
			case p.lines <- s.Text():
			default: // nobody waits for more; drop
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill bidgate: %v", err)
		}
		for range p.lines {
		}
	})
	return p
}

// await returns the first stderr line containing s, failing after limit or
// when the process ends first.
func (p *process) await(t *testing.T, s string, limit time.Duration) string {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("bidgate ended before logging %q", s)
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timer.C:
			t.Fatalf("bidgate did not log %q within %v", s, limit)
		}
	}
}

func serveArgs(t *testing.T, dbURL string, extra ...string) (args []string, base string) {
	httpPort := freePort(t)
	args = append([]string{"serve",
		"--listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--internal-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--gossip-port", fmt.Sprint(freePort(t)),
		"--postgres-url", dbURL, "--log-format", "text", "--log-level", "info",
	}, extra...)
	return args, fmt.Sprintf("http://127.0.0.1:%d", httpPort)
}

// A node whose seeds do not answer keeps trying, and meanwhile holds no
// port: a client is refused at once instead of hanging.
func TestNodeListensOnlyOnceJoined(t *testing.T) {
	_, dbURL := pgtest.New(t, 2)
	args, base := serveArgs(t, dbURL, "--seeds", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--cluster-secret", "s3cret-for-the-test-only")
	p := startProcess(t, args...)
	for attempt := 1; attempt <= 2; attempt++ {
		p.await(t, "no seed answered, retrying", 60*time.Second)
		_, err := (&http.Client{Timeout: 5 * time.Second}).Get(base + "/readyz")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("while joining, a request got %v, want connection refused", err)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.await(t, "stopped before joining the cluster", 30*time.Second)
}

// A node starts and takes bids while no Kafka broker answers: hot bids wait
// in Redis for the relay.
func TestNodeServesWithoutKafka(t *testing.T) {
	_, dbURL := pgtest.New(t, 4)
	args, base := serveArgs(t, dbURL, "--kafka", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	p := startProcess(t, args...)
	p.await(t, "bidgate serving", 60*time.Second)

	status, body := call(t, "POST", base+"/auctions", map[string]any{"sellerId": 1, "title": "no kafka",
		"startPrice": "10.00", "minIncrement": "1.00", "endTime": time.Now().Add(time.Hour).Format(time.RFC3339), "hot": true})
	if status != 201 {
		t.Fatalf("create auction: %d %v", status, body)
	}
	status, body = call(t, "POST", fmt.Sprintf("%s/auctions/%d/bids", base, int64(body["id"].(float64))),
		map[string]any{"bidderId": 2, "amount": "11.00"}, "Idempotency-Key", uuid.NewString())
	if status != 201 {
		t.Fatalf("bid while Kafka is down: %d %v", status, body)
	}
	p.await(t, "failed; retrying", 30*time.Second) // the relay, not the process, gives way
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range p.lines {
	}
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("bidgate exited with %v after SIGTERM", err)
		}
	case <-timer.C:
		t.Fatal("bidgate did not stop within 30s of SIGTERM")
	}
}
