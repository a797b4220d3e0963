package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testport"
)

// TestMain lets a test run this test binary as bidgate itself, a real OS
// process: BIDGATE_AS_MAIN=1 makes it main().
func TestMain(m *testing.M) {
	if os.Getenv("BIDGATE_AS_MAIN") == "1" {
		// BIDGATE_TEST_NOFILE lowers the file descriptor limit first, as an
		// operator's ulimit would.
		if n, err := strconv.ParseUint(os.Getenv("BIDGATE_TEST_NOFILE"), 10, 64); err == nil {
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
				fmt.Fprintln(os.Stderr, "setrlimit:", err)
				os.Exit(3)
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is a process started by a test (bidgate, a server it needs), its
// log read line by line.
type process struct {
	name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan error // its exit, once stderr is read to the end
}

func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, nil, args...)
}

// startProcessEnv is startProcess with more environment variables.
func startProcessEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "BIDGATE_AS_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	return runProcess(t, "bidgate", cmd, stderr)
}

// runProcess starts cmd, whose log is out, and kills it when the test
// ends.
func runProcess(t *testing.T, name string, cmd *exec.Cmd, out io.Reader) *process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		defer close(p.lines)
		s := bufio.NewScanner(out)
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
			t.Errorf("kill %s: %v", name, err)
		}
		for range p.lines {
		}
	})
	return p
}

// await returns the first log line containing s, failing after limit or
// when the process ends first.
func (p *process) await(t *testing.T, s string, limit time.Duration) string {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s ended before logging %q", p.name, s)
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timer.C:
			t.Fatalf("%s did not log %q within %v", p.name, s, limit)
		}
	}
}

// serveArgs are the arguments of a node on dbURL that trusts the dev key
// at keyPath.
func serveArgs(t *testing.T, dbURL, keyPath string, extra ...string) (args []string, base string) {
	t.Helper()
	httpPort := testport.Free(t)
	args = append([]string{"serve",
		"--listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--internal-listen", testport.Addr(t),
		"--admin-listen", "127.0.0.1:0",
		"--postgres-conns", "4",
		"--gossip-port", fmt.Sprint(testport.Free(t)),
		"--postgres-url", dbURL, "--log-format", "text", "--log-level", "info",
		"--dev-key", keyPath,
	}, append(slices.Clone(clusterArgs), extra...)...)
	return args, fmt.Sprintf("http://127.0.0.1:%d", httpPort)
}

// A node whose seeds do not answer keeps trying, and meanwhile holds no
// port: a client is refused at once instead of hanging.
func TestNodeListensOnlyOnceJoined(t *testing.T) {
	_, dbURL := testdb.New(t, 2)
	keyPath, _ := devKey(t)
	args, base := serveArgs(t, dbURL, keyPath, "--seeds", testport.Addr(t),
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
	_, dbURL := testdb.New(t, 4)
	keyPath, key := devKey(t)
	args, base := serveArgs(t, dbURL, keyPath, "--kafka", testport.Addr(t))
	p := startProcess(t, args...)
	p.await(t, "bidgate serving", 60*time.Second)

	status, body := call(t, "POST", base+"/auctions", map[string]any{"title": "no kafka",
		"startPrice": "10.00", "minIncrement": "1.00", "endTime": time.Now().Add(time.Hour).Format(time.RFC3339), "hot": true},
		bearer(t, key, 1, auth.ScopeSell)...)
	if status != 201 {
		t.Fatalf("create auction: %d %v", status, body)
	}
	status, body = call(t, "POST", fmt.Sprintf("%s/auctions/%d/bids", base, int64(body["id"].(float64))),
		map[string]any{"amount": "11.00"}, append([]string{"Idempotency-Key", uuid.NewString()}, bearer(t, key, 2, auth.ScopeBid)...)...)
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

// run runs this binary as bidgate with args to its end, bounded, and
// returns its stdout, its stderr and its exit code.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BIDGATE_AS_MAIN=1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		code = exit.ExitCode()
	default:
		t.Fatalf("bidgate %v: %v (stderr %q)", args, err, errOut.String())
	}
	return out.String(), errOut.String(), code
}

// Secure by default: serve does not start without a way to verify tokens.
func TestServeRefusesToStartWithoutTokenVerification(t *testing.T) {
	for _, env := range []string{"BIDGATE_DEV_KEY", "BIDGATE_JWT_JWKS_FILE", "BIDGATE_JWT_JWKS_URL"} {
		if _, ok := os.LookupEnv(env); ok {
			t.Setenv(env, "") // t.Setenv restores it; an empty value is no key source
		}
	}
	_, stderr, code := run(t, "serve", "--insecure-cluster", "--listen", "127.0.0.1:0", "--postgres-url", "postgres://127.0.0.1:1/none")
	if code != 2 || !strings.Contains(stderr, "needs a way to verify bearer tokens") {
		t.Fatalf("exit %d, stderr %q; want 2 and the reason", code, stderr)
	}
}

// bidgate token prints one line, a token the dev cluster accepts: the dev
// issuer and audience, signed with the key file, with the scopes asked for.
func TestTokenCommand(t *testing.T) {
	keyPath, key := devKey(t)
	set, err := auth.JWKS(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(t.Context(), auth.Config{JWKS: set, Issuer: auth.DevIssuer, Audience: auth.DevAudience})
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"bid,sell", "bid sell", "sell, bid"} {
		out, stderr, code := run(t, "token", "--sub", "42", "--scope", scope, "--key", keyPath, "--ttl", "10m")
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("--scope %q: exit %d, stdout %q, stderr %q; want one line", scope, code, out, stderr)
		}
		p, err := v.Verify(strings.TrimSpace(out))
		if err != nil || p.UserID != 42 || !p.Can(auth.ScopeBid) || !p.Can(auth.ScopeSell) || p.Can(auth.ScopeOperator) {
			t.Fatalf("--scope %q: %+v, %v", scope, p, err)
		}
	}
	out, _, code := run(t, "token", "--sub", "42", "--scope", "bid", "--key", keyPath, "--ttl", "-1m")
	if _, err := v.Verify(strings.TrimSpace(out)); code != 0 || !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("--ttl -1m: exit %d, %v; want an expired token", code, err)
	}
	for _, args := range [][]string{
		{"--sub", "042", "--scope", "bid"},
		{"--sub", "0", "--scope", "bid"},
		{"--sub", "42"},
		{"--sub", "42", "--scope", "admin"},
		{"--sub", "42", "--scope", "bid", "--ttl", "0s"},
	} {
		if out, _, code := run(t, append([]string{"token", "--key", keyPath}, args...)...); code != 2 || out != "" {
			t.Fatalf("token %v: exit %d, stdout %q; want 2 and no token", args, code, out)
		}
	}
	if out, stderr, code := run(t, "token", "--sub", "42", "--scope", "bid", "--key", keyPath+".missing"); code != 1 || out != "" || !strings.Contains(stderr, "make run") {
		t.Fatalf("a missing key file: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// A process that does not hold the cluster's gossip key cannot join it:
// memberlist refuses its messages, it is never listed and never given an
// auction, and it keeps retrying without ever serving.
func TestNodeWithoutTheClusterKeyCannotJoin(t *testing.T) {
	_, dbURL := testdb.New(t, 4)
	keyPath, key := devKey(t)
	gossip := testport.Free(t)
	args, _ := serveArgs(t, dbURL, keyPath, "--node-id", "honest", "--gossip-port", strconv.Itoa(gossip))
	honest := startProcess(t, args...)
	admin := "http://" + logValue(t, honest.await(t, "bidgate serving", 60*time.Second), "admin")

	args, rogueBase := serveArgs(t, dbURL, keyPath, "--node-id", "rogue", "--seeds", fmt.Sprintf("127.0.0.1:%d", gossip),
		"--cluster-key", "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
		"--cluster-secret", "the rogue's own secret")
	rogue := startProcess(t, args...)
	for range 2 {
		rogue.await(t, "no seed answered, retrying", 60*time.Second)
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(rogueBase + "/readyz"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("the rogue serves: %v", err)
	}
	operator := bearer(t, key, 1, auth.ScopeOperator)
	status, members := call(t, "GET", admin+"/cluster/members", nil, operator...)
	if list, _ := members["members"].([]any); status != 200 || len(list) != 1 {
		t.Fatalf("members: %d %v, want the honest node alone", status, members)
	}
	for id := 1; id <= 50; id++ {
		status, owner := call(t, "GET", fmt.Sprintf("%s/cluster/owner/%d", admin, id), nil, operator...)
		if o, _ := owner["owner"].(map[string]any); status != 200 || o["id"] != "honest" {
			t.Fatalf("owner of auction %d: %d %v", id, status, owner)
		}
	}
}

// A client opening connections past the node's file descriptor limit does
// not end the process: accepts that fail for want of descriptors are waited
// out, and once the client lets go the node serves again. (The default
// --max-conns, half the limit, sheds such a flood before; it is raised here
// so that the descriptors really run out.)
func TestNodeSurvivesRunningOutOfDescriptors(t *testing.T) {
	_, dbURL := testdb.New(t, 4)
	keyPath, _ := devKey(t)
	args, base := serveArgs(t, dbURL, keyPath, "--postgres-conns", "4", "--max-conns", "100000", "--max-conns-per-ip", "100000")
	p := startProcessEnv(t, []string{"BIDGATE_TEST_NOFILE=256"}, args...)
	p.await(t, "bidgate serving", 60*time.Second)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addr := strings.TrimPrefix(base, "http://")
	for range 400 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			break // the backlog is full too: enough
		}
		conns = append(conns, c)
	}
	p.await(t, "accepting connections failed; waiting and retrying", 30*time.Second)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: 5 * time.Second}
	eventually(t, 30*time.Second, "the node serving again after the flood", func() error { return healthy(client, base+"/healthz") })
	select {
	case err := <-p.done:
		t.Fatalf("the node exited: %v", err)
	default:
	}
}

// logValue reads key=value from a text log line.
func logValue(t *testing.T, line, key string) string {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in log line %q", key, line)
	return ""
}
