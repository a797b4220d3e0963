package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// FloorCommand is bidbench's hidden subcommand that runs the floor server:
// the reads scenario and a ramp's --floor start their own executable with
// it, so that the floor's CPU is a process of its own, apart from the
// generator's.
const FloorCommand = "floor-server"

// floorReady starts the line the floor server prints once it listens.
const floorReady = "floor listening on "

// FloorMain is the floor server's process: a fasthttp server on a free
// loopback port that answers every request 200 with --body-bytes of JSON
// and does nothing else (the HTTP floor a GET is measured against). It
// prints its address on stdout and serves until stdin ends, so that it
// never outlives the bidbench that started it. It returns the exit code.
func FloorMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bidbench "+FloorCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int("body-bytes", 512, "size of every answer's body")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *size < 2 || *size > 1<<20 {
		fmt.Fprintln(stderr, "bidbench floor-server: --body-bytes must be from 2 to 1048576")
		return 2
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "bidbench floor-server:", err)
		return 1
	}
	body := floorBody(*size)
	srv := &fasthttp.Server{Name: "bidbench-floor", Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%s%s\n", floorReady, ln.Addr())
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(gone)
	}()
	select {
	case <-gone:
		if err := srv.Shutdown(); err != nil {
			fmt.Fprintln(stderr, "bidbench floor-server:", err)
			return 1
		}
		return 0
	case err := <-served:
		fmt.Fprintln(stderr, "bidbench floor-server:", err)
		return 1
	}
}

// floorBody is a JSON object of exactly n bytes (n >= 2).
func floorBody(n int) []byte {
	if n < len(`{"p":""}`) {
		return []byte(`{}` + strings.Repeat(" ", n-2))
	}
	pad := strings.Repeat("x", n-len(`{"p":""}`))
	return []byte(`{"p":"` + pad + `"}`)
}

// floorProc is a running floor server.
type floorProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	target Target
	exited chan struct{}
	err    error // the exit's, once exited is closed
	stderr *lockedText
}

// startFloor runs this executable's floor-server subcommand with a body
// of size bytes and waits (up to 10 s) for its address.
func startFloor(ctx context.Context, size int) (*floorProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("floor server: find this executable: %w", err)
	}
	cmd := exec.Command(exe, FloorCommand, "--body-bytes", strconv.Itoa(size))
	p := &floorProc{cmd: cmd, exited: make(chan struct{}), stderr: &lockedText{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor server: start %s: %w", exe, err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	var first string
	select {
	case first = <-line:
	case <-timer.C:
	case <-ctx.Done():
	}
	addr, ok := strings.CutPrefix(first, floorReady)
	if !ok {
		p.stop()
		return nil, fmt.Errorf("floor server did not start (%q): %v %s", first, p.err, p.stderr)
	}
	p.target = Target{Base: "http://" + addr, Addr: addr}
	return p, nil
}

// sample is the CPU counters of a run against the floor: the floor
// process's in place of the nodes' (Redis is not read).
func (p *floorProc) sample(context.Context) cpuSample {
	s := cpuSample{at: time.Now()}
	s.self, s.selfErr = selfCPUSeconds()
	v, err := procCPUSeconds(p.cmd.Process.Pid)
	s.nodes, s.nodesErr = []float64{v}, err
	return s
}

// stop ends the server (its stdin closes) and waits for it, killing it
// after 10 s.
func (p *floorProc) stop() error {
	_ = p.stdin.Close()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("floor server: did not stop within 10 s of its stdin closing: killed")
	}
	if p.err != nil {
		return fmt.Errorf("floor server: %w: %s", p.err, p.stderr)
	}
	return nil
}

// lockedText collects a child's stderr (up to 64 KiB) for an error message.
type lockedText struct {
	mu  sync.Mutex
	buf []byte
}

func (t *lockedText) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := 64<<10 - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (t *lockedText) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
