package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testenv"
	"bidgate/internal/testport"
	"bidgate/internal/testredis"
)

// lockedBuffer collects a subprocess's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testRedisAddr is the test Redis: the Redis Cluster's nodes under make
// test-cluster, else one server.
func testRedisAddr() string {
	if a := os.Getenv("BIDGATE_TEST_REDIS_CLUSTER"); a != "" {
		return a
	}
	if a := os.Getenv("BIDGATE_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// stack is a real bidgate process (every role, embedded Kafka) on a fresh
// test database, trusting tokens signed by key (dev issuer and audience).
type stack struct {
	base, dbURL string
	metrics     string // the admin endpoint's /metrics
	key         *auth.SigningKey
}

// startStack builds the real binary with the go on PATH, starts `bidgate
// serve` on free loopback ports with a dev key of its own, waits for
// /readyz and stops it (SIGTERM, then a bounded wait) when the test ends.
func startStack(t *testing.T) stack {
	t.Helper()
	bin := buildBidgate(t)
	_ = testredis.Client(t) // fails the test clearly when Redis is not there
	_, dbURL := testdb.New(t, 2)
	// The node's dev key, made here so that the harness has it too.
	keyFile := filepath.Join(t.TempDir(), "dev-key.pem")
	key, _, err := auth.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	listen, admin := testport.Addr(t), testport.Addr(t)
	cmd := exec.Command(bin, "serve",
		"--listen", listen,
		"--internal-listen", testport.Addr(t),
		"--admin-listen", admin,
		"--postgres-conns", "8",
		"--gossip-port", fmt.Sprint(testport.Free(t)),
		"--kafka-embedded-port", fmt.Sprint(testport.Free(t)),
		"--postgres-url", dbURL,
		"--redis-addrs", testRedisAddr(),
		"--dev-key", keyFile,
		"--insecure-cluster", // one node: nothing to gossip or forward with
		"--node-id", "bench-test",
		"--log-level", "warn")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	// Registered after testdb.New, so it runs first: the process stops
	// before its database is dropped.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if exitErr != nil {
				t.Errorf("bidgate serve exited with %v\n%s", exitErr, out)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("bidgate serve did not stop within 30s of SIGTERM\n%s", out)
		}
		if t.Failed() {
			t.Logf("bidgate output:\n%s", out)
		}
	})

	base := "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("bidgate serve exited at start-up: %v\n%s", exitErr, out)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("bidgate not ready after 30s: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stack{base: base, dbURL: dbURL, metrics: "http://" + admin + "/metrics", key: key}
}

// buildBidgate builds the real binary with the go on PATH (the build
// cache makes a second build a link).
func buildBidgate(t *testing.T) string {
	t.Helper()
	goBin := testenv.Need(t, "go")
	bin := filepath.Join(t.TempDir(), "bidgate")
	build := exec.Command(goBin, "build", "-o", bin, "bidgate/cmd/bidgate")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build bidgate: %v\n%s", err, out)
	}
	return bin
}

// testWriter sends the harness's notes to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
