package bench

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"bidgate/internal/testdb"
	"bidgate/internal/testport"
)

// The comparison puts each size's run on a row, bidgate's CPU per decided
// bid as a ratio to the first row and to the floor's (--floor), and "-"
// where a party was not measured.
func TestWriteComparison(t *testing.T) {
	run := func(server, redis *CPUUse, decided int64, p99 float64, failed bool) *Result {
		r := &Result{Latency: Summary{All: Latency{P50: 2, P99: p99}}, Warmup: &Summary{All: Latency{P99: 10 * p99}},
			CPU: &CPU{WallSeconds: 10, Decided: decided, Server: server, Redis: redis}}
		if server != nil {
			r.Floor = &FlashSaleFloor{DecidedVsFloor: server.UsPerDecided / 40}
			wait := server.UsPerDecided / 600
			r.CPU.Machine = &MachineUse{CPUs: 2, BusyCores: server.UsPerDecided / 250, CPUWait: &wait}
			r.CPU.Postgres = &CPUUse{UsPerDecided: server.UsPerDecided / 2}
		}
		if failed {
			r.Checks = []Check{{Name: "x", Pass: false}}
		}
		return r
	}
	for _, tc := range []struct {
		name string
		runs []Compared
		want []string
	}{
		{"one and three", []Compared{
			{1, run(&CPUUse{UsPerDecided: 300}, &CPUUse{UsPerDecided: 70}, 25000, 36.9, false)},
			{3, run(&CPUUse{UsPerDecided: 420}, &CPUUse{UsPerDecided: 75}, 24000, 80, true)},
		}, []string{"1  2500  2.00  36.90  369.00  300.0  1.00x  7.50  70.0  150.0  1.20/2  50%  0", "3  2400  2.00  80.00  800.00  420.0  1.40x  10.50  75.0  210.0  1.68/2  70%  1"}},
		{"a ramp's best step", []Compared{
			{1, &Result{Ramp: &Ramp{Best: &Step{Latency: Latency{P50: 1, P99: 9},
				CPU: CPU{WallSeconds: 5, Decided: 50000, Server: &CPUUse{UsPerDecided: 50}}}}}},
			{3, &Result{Ramp: &Ramp{}}},
		}, []string{"1  10000  1.00  9.00  -  50.0  1.00x  -  -  -  -  -  0", "3  -  0.00  0.00  -  -  -  -  -  -  -  -  0"}},
		{"unmeasured", []Compared{
			{1, run(nil, nil, 100, 5, false)},
			{3, &Result{}},
		}, []string{"1  10  2.00  5.00  50.00  -  -  -  -  -  -  -  0", "3  -  0.00  0.00  -  -  -  -  -  -  -  -  0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteComparison(&b, tc.runs)
			got := b.String()
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(strings.Fields(got), "  "), w) {
					t.Errorf("no row %q in\n%s", w, got)
				}
			}
		})
	}
}

// StartDevCluster starts the real bidgate dev, returns once its node is
// ready, and Stop ends it: its ports are free again.
func TestStartDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bidgate binary")
	}
	bin := buildBidgate(t)
	_, dbURL := testdb.New(t, 2)
	t.Setenv("BIDGATE_POSTGRES_CONNS", "4") // the nodes inherit it
	opt := DefaultOptions()
	opt.PostgresURL, opt.RedisAddrs = dbURL, testRedisAddr()
	opt.KeyFile = filepath.Join(t.TempDir(), "dev-key.pem")
	base := testport.Base(t, 0, 100, 200, 300, 400) // API, internal, gossip, admin, broker
	c, err := StartDevCluster(context.Background(), bin, 1, base, opt, filepath.Join(t.TempDir(), "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(c.Targets + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz: %d", resp.StatusCode)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(c.Targets + "/readyz"); err == nil {
		t.Fatal("the node still answers after Stop")
	}
}
