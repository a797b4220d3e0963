package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// cpuNode is an HTTP server with a Prometheus registry on /metrics, as a
// bidgate node's admin endpoint has, whose process_cpu_seconds_total the
// test sets (page, when given, is served instead of the registry).
type cpuNode struct {
	srv  *httptest.Server
	secs atomic.Uint64 // float64 bits
}

func newCPUNode(t *testing.T, withMetric bool, page string) *cpuNode {
	t.Helper()
	n := &cpuNode{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "bidgate_test_other", Help: "Something else on the page."}))
	if withMetric {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "process_cpu_seconds_total",
			Help: "Total user and system CPU time spent in seconds."}, func() float64 { return math.Float64frombits(n.secs.Load()) }))
	}
	mux := http.NewServeMux()
	if page != "" {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) })
	} else {
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *cpuNode) set(secs float64) { n.secs.Store(math.Float64bits(secs)) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestCPUBetweenScrapes scrapes real HTTP servers serving a Prometheus
// registry at the start and end of a span and checks the arithmetic:
// cores, µs per decided bid and per request, and what makes the server's
// CPU missing instead of wrong.
func TestCPUBetweenScrapes(t *testing.T) {
	const wall = 2.0 // seconds between the samples, set below
	tests := []struct {
		name              string
		start, end        []float64 // per node
		noMetric          bool      // the last node's page lacks the counter
		page              string    // the last node serves this instead
		down              bool      // the last node stops before the end sample
		requests, decided int64
		// want, when missing is "":
		cores, usPerDecided, usPerRequest float64
		byNode                            []float64
		missing                           string // substring of ServerMissing
	}{
		{name: "one node", start: []float64{10}, end: []float64{11.5}, requests: 40_000, decided: 30_000,
			cores: 0.75, usPerDecided: 50, usPerRequest: 37.5, byNode: []float64{1.5}},
		{name: "three nodes summed", start: []float64{1, 2, 3}, end: []float64{1.25, 2.5, 3.25}, requests: 20_000, decided: 10_000,
			cores: 0.5, usPerDecided: 100, usPerRequest: 50, byNode: []float64{0.25, 0.5, 0.25}},
		{name: "idle span", start: []float64{7, 7}, end: []float64{7, 7}, requests: 0, decided: 0,
			cores: 0, usPerDecided: 0, usPerRequest: 0, byNode: []float64{0, 0}},
		{name: "nothing decided", start: []float64{5}, end: []float64{5.2}, requests: 1000, decided: 0,
			cores: 0.1, usPerDecided: 0, usPerRequest: 200, byNode: []float64{0.2}},
		{name: "a node restarted", start: []float64{1, 50}, end: []float64{2, 0.5}, requests: 10, decided: 10,
			missing: "node 2: the counter went backwards"},
		{name: "a node without the counter", start: []float64{1, 1}, end: []float64{2, 2}, noMetric: true, requests: 10, decided: 10,
			missing: "no process_cpu_seconds_total"},
		{name: "not a metrics page", start: []float64{1, 1}, end: []float64{2, 2}, page: "<html>hello</html>\n", requests: 10, decided: 10,
			missing: "scrape http://127.0.0.1:"},
		{name: "a node gone by the end", start: []float64{1, 1}, end: []float64{2, 2}, down: true, requests: 10, decided: 10,
			missing: "scrape http://127.0.0.1:"},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*cpuNode, len(tc.start))
			var list []string
			for i := range nodes {
				last, page := i == len(nodes)-1, ""
				if last {
					page = tc.page
				}
				nodes[i] = newCPUNode(t, !(last && tc.noMetric), page)
				list = append(list, nodes[i].srv.URL) // no path: /metrics
			}
			urls, err := ParseMetricsURLs(ctx, strings.Join(list, ","))
			if err != nil {
				t.Fatal(err)
			}
			m := &cpuMeter{urls: urls, client: loopbackHTTPClient()}
			for i, n := range nodes {
				n.set(tc.start[i])
			}
			a := m.sample(ctx)
			for i, n := range nodes {
				n.set(tc.end[i])
			}
			if tc.down {
				nodes[len(nodes)-1].srv.Close()
			}
			b := m.sample(ctx)
			b.at = a.at.Add(time.Duration(wall * float64(time.Second)))

			c := cpuBetween(a, b, tc.requests, tc.decided)
			if c.WallSeconds != wall || c.Requests != tc.requests || c.Decided != tc.decided {
				t.Errorf("span: %+v", c)
			}
			if tc.missing != "" {
				if c.Server != nil || !strings.Contains(c.ServerMissing, tc.missing) {
					t.Errorf("server = %+v, missing %q; want missing containing %q", c.Server, c.ServerMissing, tc.missing)
				}
				if cells := c.Cells(); cells[0] != "-" || cells[1] != "-" {
					t.Errorf("cells %v: a missing server CPU should show as -", cells)
				}
			} else {
				s := c.Server
				if s == nil {
					t.Fatalf("server CPU missing: %s", c.ServerMissing)
				}
				if !near(s.Cores, tc.cores) || !near(s.UsPerDecided, tc.usPerDecided) || !near(s.UsPerRequest, tc.usPerRequest) {
					t.Errorf("server = %+v, want cores %v, %v µs/decided, %v µs/request", *s, tc.cores, tc.usPerDecided, tc.usPerRequest)
				}
				if len(c.ServerByNode) != len(tc.byNode) {
					t.Fatalf("by node %v, want %v", c.ServerByNode, tc.byNode)
				}
				for i := range tc.byNode {
					if !near(c.ServerByNode[i], tc.byNode[i]) {
						t.Errorf("by node %v, want %v", c.ServerByNode, tc.byNode)
					}
				}
				if cells := c.Cells(); (tc.decided == 0) != (cells[1] == "-") {
					t.Errorf("cells %v with %d decided", cells, tc.decided)
				}
			}
			// This process's own CPU is always there; Redis is missing, as
			// the meter has none to ask.
			if g := c.Generator; g == nil || g.Seconds < 0 || c.GenMissing != "" {
				t.Errorf("generator = %+v (%s)", g, c.GenMissing)
			}
			if c.Redis != nil || c.RedisMissing == "" {
				t.Errorf("redis = %+v, missing %q", c.Redis, c.RedisMissing)
			}
			if s := c.Sentence(); !strings.Contains(s, "bidbench") || !strings.Contains(s, "Redis CPU missing") {
				t.Errorf("sentence %q", s)
			}
			// PostgreSQL's and the machine's come from this machine's /proc,
			// where the tests' PostgreSQL runs; the machine's ticks (10 ms)
			// may not advance between two samples this close.
			if runtime.GOOS == "linux" {
				if c.Postgres == nil || (c.Machine == nil && !strings.Contains(c.MachineMissing, "did not advance")) {
					t.Errorf("PostgreSQL %+v (%s), machine %+v (%s)", c.Postgres, c.PostgresMissing, c.Machine, c.MachineMissing)
				}
				if s := c.Sentence(); !strings.Contains(s, "; PostgreSQL ") || !strings.Contains(s, "; machine ") {
					t.Errorf("sentence %q", s)
				}
			}
		})
	}
}

// TestScrapeProcessCollector reads the counter bidgate's nodes export (the
// client library's process collector) for this process: it is there, and
// it grows with work done.
func TestScrapeProcessCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	client := loopbackHTTPClient()
	a, err := scrapeCPU(context.Background(), client, srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU, more than the counter's resolution (10 ms ticks).
	deadline, x := time.Now().Add(50*time.Millisecond), 0
	for time.Now().Before(deadline) {
		x++
	}
	b, err := scrapeCPU(context.Background(), client, srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if a <= 0 || b < a {
		t.Errorf("process_cpu_seconds_total %v then %v (after %d loops)", a, b, x)
	}
}

func TestParseRedisCPU(t *testing.T) {
	tests := []struct {
		info string
		want float64
		ok   bool
	}{
		{"# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\n", 3.75, true},
		{"used_cpu_user:0.5\nused_cpu_sys:0.25\n", 0.75, true},
		{"# CPU\r\nused_cpu_sys:1.0\r\n", 0, false},
		{"used_cpu_sys:x\r\nused_cpu_user:1\r\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		got, err := parseRedisCPU(tc.info)
		if (err == nil) != tc.ok || !near(got, tc.want) {
			t.Errorf("parseRedisCPU(%q) = %v, %v; want %v (ok %v)", tc.info, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseMetricsURLs(t *testing.T) {
	ctx := context.Background()
	got, err := ParseMetricsURLs(ctx, "http://127.0.0.1:8380, http://localhost:8381/metrics,http://[::1]:8382/custom/path")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "http://127.0.0.1:8380/metrics" || !strings.HasSuffix(got[1], ":8381/metrics") ||
		got[2] != "http://[::1]:8382/custom/path" {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"http://10.0.0.1:9090/metrics", "https://127.0.0.1:9090/metrics", "127.0.0.1:9090",
		"http://127.0.0.1:9090/metrics?x=1", "http://u:p@127.0.0.1:9090/metrics"} {
		if _, err := ParseMetricsURLs(ctx, bad); err == nil {
			t.Errorf("ParseMetricsURLs(%q) accepted it", bad)
		}
	}
	for _, tc := range []struct{ public, admin string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8380"},
		{"[::1]:8082", "http://[::1]:8382"},
	} {
		if a, err := devAdmin(tc.public); err != nil || a != tc.admin {
			t.Errorf("devAdmin(%s) = %q, %v; want %s", tc.public, a, err, tc.admin)
		}
	}
	if _, err := devAdmin("127.0.0.1:65400"); err == nil {
		t.Error("an admin port above 65535 was derived")
	}
}

// TestReportsCarryCPU: every step row of the text and HTML reports has the
// CPU cells, a missing party shows as "-", and the hot-max summary states
// the best step's fraction of the Redis limit and its CPU.
func TestReportsCarryCPU(t *testing.T) {
	measured := CPU{WallSeconds: 3, Requests: 30_000, Decided: 29_000,
		Server:    &CPUUse{Seconds: 1.16, Cores: 0.387, UsPerDecided: 40, UsPerRequest: 38.7},
		Generator: &CPUUse{Seconds: 0.6, Cores: 0.2, UsPerDecided: 20.7, UsPerRequest: 20},
		Redis:     &CPUUse{Seconds: 0.29, Cores: 0.097, UsPerDecided: 10, UsPerRequest: 9.7},
		Postgres:  &CPUUse{Seconds: 0.9, Cores: 0.3, UsPerDecided: 31, UsPerRequest: 30},
		Machine:   &MachineUse{CPUs: 2, BusyCores: 1.5, CPUWaitMissing: "no CPU pressure from the kernel"}}
	unscraped := measured
	unscraped.Server, unscraped.ServerMissing = nil, "scrape http://127.0.0.1:8380/metrics: connection refused"
	best := Step{N: 1, Offered: 10_000, DecidedPerSec: 9_666, AcceptedPerSec: 5_000, OK: true, CPU: measured}
	res := &Result{Scenario: "hot-max", Started: time.Now(), Finished: time.Now(), MetricsURLs: []string{"http://127.0.0.1:8380/metrics"},
		Ramp: &Ramp{Hot: true, AuctionID: 7, P99Ms: 200, Best: &best, Stop: "step 2: p99 300.0 ms > 200 ms",
			Steps:   []Step{best, {N: 2, Offered: 15_000, Reason: "p99 300.0 ms > 200 ms", CPU: unscraped}},
			VsLimit: &Ratio{Limit: "Redis bid script, 64 caller(s), 1 bid(s)/call", LimitDecided: 16_110, DecidedFraction: 0.6}}}
	var text strings.Builder
	WriteText(&text, res)
	out := text.String()
	for _, want := range []string{"bidgate µs/decided", "bidbench µs/req", "Redis cores",
		"40.0", "20.0", "0.600 of the decided rate of \"Redis bid script, 64 caller(s), 1 bid(s)/call\"",
		"CPU at that step: bidgate 0.39 cores, 40.0 µs per decided bid; bidbench 0.20 cores, 20.0 µs per request",
		"Redis 0.10 cores, 10.0 µs per decided bid; PostgreSQL 0.30 cores, 31.0 µs per decided bid (29000 decided",
		"machine 1.50 of 2 CPUs busy (CPU wait unknown: no CPU pressure from the kernel)",
		"server CPU from: http://127.0.0.1:8380/metrics"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "2" && (len(f) < 13 || f[11] != "-" || f[12] != "-") {
			t.Errorf("step 2's bidgate cells should be -: %q", line)
		}
	}
	path := t.TempDir() + "/r.html"
	if err := WriteHTML(path, res); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<th>bidgate µs/decided</th>", "<td>40.0</td>", "<td>-</td>", "<b>0.600</b>", "CPU at that step: bidgate 0.39 cores"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}
