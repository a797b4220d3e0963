package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// DevCluster is a `bidgate dev` cluster that bidbench started itself, to
// run the same load on clusters of different sizes (--compare-nodes).
type DevCluster struct {
	Nodes   int
	Targets string // the nodes' base URLs, comma-separated
	log     string // the cluster's output
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error // the process's exit, once exited is closed
}

var errExitedEarly = errors.New("status 0")

// Bounds on a compared cluster's start and stop.
const (
	devReadyTimeout = 90 * time.Second
	devStopTimeout  = 30 * time.Second
)

// StartDevCluster runs `bin dev --nodes n` on loopback, its nodes' API
// ports from basePort (the broker on basePort+400), on the stores of opt
// and trusting opt.KeyFile, with its output in logPath; it returns once
// every node answers /readyz, or an error (the process stopped).
func StartDevCluster(ctx context.Context, bin string, nodes, basePort int, opt Options, logPath string) (*DevCluster, error) {
	if nodes < 1 || basePort < 1024 || basePort+400 > 65535 {
		return nil, fmt.Errorf("dev cluster: %d nodes from port %d: out of range", nodes, basePort)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("dev cluster log: %w", err)
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("dev cluster log: %w", err)
	}
	args := []string{"dev", "--nodes", strconv.Itoa(nodes), "--base-port", strconv.Itoa(basePort),
		"--kafka-embedded-port", strconv.Itoa(basePort + 400),
		"--postgres-url", opt.PostgresURL, "--redis-addrs", opt.RedisAddrs, "--dev-key", opt.KeyFile}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if opt.RedisPassword != "" {
		cmd.Env = append(os.Environ(), "BIDGATE_REDIS_PASSWORD="+opt.RedisPassword)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s dev: %w", bin, err)
	}
	c := &DevCluster{Nodes: nodes, log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		log.Close()
		close(c.exited)
	}()
	var bases []string
	for i := range nodes {
		bases = append(bases, "http://127.0.0.1:"+strconv.Itoa(basePort+i))
	}
	c.Targets = strings.Join(bases, ",")
	if err := c.awaitReady(ctx, bases); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// awaitReady polls every node's /readyz until it answers 200.
func (c *DevCluster) awaitReady(ctx context.Context, bases []string) error {
	ctx, cancel := context.WithTimeout(ctx, devReadyTimeout)
	defer cancel()
	client := loopbackHTTPClient()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, base := range bases {
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
			if err != nil {
				return err
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-c.exited:
				return fmt.Errorf("dev cluster of %d exited (%v) before %s was ready: see %s", c.Nodes, cmp.Or(c.err, errExitedEarly), base, c.log)
			case <-ctx.Done():
				return fmt.Errorf("dev cluster of %d: %s not ready: %w", c.Nodes, base, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

// Stop ends the cluster as Ctrl-C does (bidgate dev stops its nodes and
// broker), and kills it if it has not exited in time.
func (c *DevCluster) Stop() error {
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop dev cluster: %w", err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(devStopTimeout):
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill dev cluster: %w", err)
	}
	<-c.exited
	return fmt.Errorf("dev cluster of %d did not stop within %s: killed (its nodes may be left running)", c.Nodes, devStopTimeout)
}

// Compared is one cluster size's run of a comparison.
type Compared struct {
	Nodes  int
	Result *Result
}

// measured is what a run is compared by: a flash sale's load as a whole,
// a ramp's best step (nil CPU: none held).
func (r Compared) measured() (*CPU, Latency) {
	if ramp := r.Result.Ramp; ramp != nil {
		if ramp.Best == nil {
			return nil, Latency{}
		}
		return &ramp.Best.CPU, ramp.Best.Latency
	}
	return r.Result.CPU, r.Result.Latency.All
}

// WriteComparison prints the runs side by side: rates, latency (and the
// warm-up's p99, the cold start left out of the rest), and each
// party's CPU per decided bid (PostgreSQL's: every postgres process on
// the machine), with bidgate's as a ratio to the first run
// and, with a flash sale's --floor, to the HTTP floor's per answer; and
// how busy the machine was, which the latencies depend on as much.
func WriteComparison(w io.Writer, runs []Compared) {
	fmt.Fprintln(w, "\nthe same load on each cluster size (a ramp: its best step; CPU per decided bid; ratio to the first row)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tdecided/s\tp50 ms\tp99 ms\twarm-up p99 ms\tbidgate µs/decided\tratio\t× floor\tRedis µs/decided\tPostgreSQL µs/decided\tbusy CPUs\tCPU wait\tchecks failed\t")
	var first float64
	for i, r := range runs {
		c, lat := r.measured()
		cells := []string{strconv.Itoa(r.Nodes), "-", fmt.Sprintf("%.2f", lat.P50), fmt.Sprintf("%.2f", lat.P99), "-", "-", "-", "-", "-", "-", "-", "-",
			strconv.Itoa(len(r.Result.Failed()))}
		if wu := r.Result.Warmup; wu != nil {
			cells[4] = fmt.Sprintf("%.2f", wu.All.P99)
		}
		if c != nil {
			if c.WallSeconds > 0 {
				cells[1] = fmt.Sprintf("%.0f", float64(c.Decided)/c.WallSeconds)
			}
			if c.Server != nil && c.Decided > 0 {
				cells[5] = fmt.Sprintf("%.1f", c.Server.UsPerDecided)
				if i == 0 {
					first = c.Server.UsPerDecided
				}
				if first > 0 {
					cells[6] = fmt.Sprintf("%.2fx", c.Server.UsPerDecided/first)
				}
			}
			if c.Redis != nil && c.Decided > 0 {
				cells[8] = fmt.Sprintf("%.1f", c.Redis.UsPerDecided)
			}
			if c.Postgres != nil && c.Decided > 0 {
				cells[9] = fmt.Sprintf("%.1f", c.Postgres.UsPerDecided)
			}
			if m := c.Machine; m != nil {
				cells[10] = fmt.Sprintf("%.2f/%d", m.BusyCores, m.CPUs)
				if m.CPUWait != nil {
					cells[11] = fmt.Sprintf("%.0f%%", 100**m.CPUWait)
				}
			}
		}
		if f := r.Result.Floor; f != nil && f.DecidedVsFloor > 0 {
			cells[7] = fmt.Sprintf("%.2f", f.DecidedVsFloor)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
}
