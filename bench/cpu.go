package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"bidgate/internal/auth"
)

// CPU is what a span of the run (a ramp step, a flash sale's load) cost in
// processor time: bidgate's nodes summed (their process_cpu_seconds_total),
// bidbench itself (getrusage) and Redis (INFO cpu, the whole server, so any
// other client's load counts too), PostgreSQL (its processes on this
// machine) and the machine as a whole. A party that could not be measured
// is nil and its *Missing field says why.
type CPU struct {
	WallSeconds float64 `json:"wallSeconds"`
	Requests    int64   `json:"requests"` // sent by bidbench in the span
	Decided     int64   `json:"decided"`  // answered 201 or 409
	Server      *CPUUse `json:"server,omitempty"`
	// ServerByNode is each node's CPU seconds, in the order of
	// Result.MetricsURLs.
	ServerByNode  []float64 `json:"serverCpuSecondsByNode,omitempty"`
	ServerMissing string    `json:"serverMissing,omitempty"`
	Generator     *CPUUse   `json:"generator,omitempty"`
	GenMissing    string    `json:"generatorMissing,omitempty"`
	Redis         *CPUUse   `json:"redis,omitempty"`
	RedisMissing  string    `json:"redisMissing,omitempty"`
	// Postgres is every postgres process's on this machine, whoever's
	// work it did in the span; a process that exited within it took its
	// CPU along, and PostgresExited counts those.
	Postgres        *CPUUse `json:"postgres,omitempty"`
	PostgresMissing string  `json:"postgresMissing,omitempty"`
	PostgresExited  int     `json:"postgresExited,omitempty"`
	// Machine is the whole box's CPU over the span; nil off Linux, and
	// MachineMissing says why.
	Machine        *MachineUse `json:"machine,omitempty"`
	MachineMissing string      `json:"machineMissing,omitempty"`
}

// CPUUse is one party's processor time over the span. The per-bid and
// per-request figures are 0 when the span had none.
type CPUUse struct {
	Seconds      float64 `json:"cpuSeconds"`
	Cores        float64 `json:"cores"` // CPU seconds per second of the span
	UsPerDecided float64 `json:"usPerDecidedBid"`
	UsPerRequest float64 `json:"usPerRequest"`
}

func useOf(secs, wall float64, requests, decided int64) *CPUUse {
	u := &CPUUse{Seconds: secs}
	if wall > 0 {
		u.Cores = secs / wall
	}
	if decided > 0 {
		u.UsPerDecided = secs * 1e6 / float64(decided)
	}
	if requests > 0 {
		u.UsPerRequest = secs * 1e6 / float64(requests)
	}
	return u
}

// cpuSample is every party's CPU counter at one moment.
type cpuSample struct {
	at       time.Time
	nodes    []float64 // per metrics URL
	nodesErr error
	self     float64
	selfErr  error
	redis    float64
	redisErr error
	pg       map[int]float64 // postgres processes' CPU seconds by pid
	pgErr    error
	machine  machineSample
}

// cpuBetween is the CPU spent from a to b, charged to requests sent and
// bids decided in between.
func cpuBetween(a, b cpuSample, requests, decided int64) CPU {
	c := CPU{WallSeconds: b.at.Sub(a.at).Seconds(), Requests: requests, Decided: decided}
	delta := func(x, y float64, ex, ey error) (float64, string) {
		switch {
		case ex != nil:
			return 0, ex.Error()
		case ey != nil:
			return 0, ey.Error()
		case y < x:
			return 0, "the counter went backwards (did the process restart?)"
		}
		return y - x, ""
	}
	switch {
	case a.nodesErr != nil || b.nodesErr != nil:
		_, c.ServerMissing = delta(0, 0, a.nodesErr, b.nodesErr)
	case len(a.nodes) == 0 || len(a.nodes) != len(b.nodes):
		c.ServerMissing = "no metrics URL to scrape"
	default:
		var sum float64
		for i := range a.nodes {
			d, missing := delta(a.nodes[i], b.nodes[i], nil, nil)
			if missing != "" {
				c.ServerMissing, c.ServerByNode = fmt.Sprintf("node %d: %s", i+1, missing), nil
				break
			}
			sum += d
			c.ServerByNode = append(c.ServerByNode, d)
		}
		if c.ServerMissing == "" {
			c.Server = useOf(sum, c.WallSeconds, requests, decided)
		}
	}
	if d, missing := delta(a.self, b.self, a.selfErr, b.selfErr); missing != "" {
		c.GenMissing = missing
	} else {
		c.Generator = useOf(d, c.WallSeconds, requests, decided)
	}
	if d, missing := delta(a.redis, b.redis, a.redisErr, b.redisErr); missing != "" {
		c.RedisMissing = missing
	} else {
		c.Redis = useOf(d, c.WallSeconds, requests, decided)
	}
	if a.pgErr != nil || b.pgErr != nil {
		c.PostgresMissing = cmpErr(a.pgErr, b.pgErr).Error()
	} else {
		var secs float64
		secs, _, c.PostgresExited = pgCPUBetween(a.pg, b.pg)
		c.Postgres = useOf(secs, c.WallSeconds, requests, decided)
	}
	c.Machine, c.MachineMissing = machineBetween(a.machine, b.machine, c.WallSeconds)
	return c
}

// decidedIn counts the bids of recs the store decided: 201 or 409.
func decidedIn(recs []Record) int64 {
	var n int64
	for i := range recs {
		if o := recs[i].Outcome; o == Created || o == Conflict {
			n++
		}
	}
	return n
}

// cpuColumns head the per-step CPU cells of the text and HTML tables.
var cpuColumns = []string{"bidgate cores", "bidgate µs/decided", "bidbench cores", "bidbench µs/req", "Redis cores", "Redis µs/decided"}

// Cells are c's values under cpuColumns, "-" where missing.
func (c CPU) Cells() []string {
	cores := func(u *CPUUse) string {
		if u == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", u.Cores)
	}
	per := func(u *CPUUse, n int64, v func(*CPUUse) float64) string {
		if u == nil || n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", v(u))
	}
	decided := func(u *CPUUse) float64 { return u.UsPerDecided }
	request := func(u *CPUUse) float64 { return u.UsPerRequest }
	return []string{cores(c.Server), per(c.Server, c.Decided, decided), cores(c.Generator), per(c.Generator, c.Requests, request),
		cores(c.Redis), per(c.Redis, c.Decided, decided)}
}

// Sentence is c in words, for a summary line.
func (c CPU) Sentence() string {
	cells := c.Cells()
	part := func(who string, u *CPUUse, missing, cores, per, unit string) string {
		if u == nil {
			return who + " CPU missing (" + missing + ")"
		}
		return fmt.Sprintf("%s %s cores, %s µs per %s", who, cores, per, unit)
	}
	pg := part("PostgreSQL", nil, c.PostgresMissing, "", "", "")
	if u := c.Postgres; u != nil {
		per := "-"
		if c.Decided > 0 {
			per = fmt.Sprintf("%.1f", u.UsPerDecided)
		}
		pg = part("PostgreSQL", u, "", fmt.Sprintf("%.2f", u.Cores), per, "decided bid")
		if c.PostgresExited > 0 {
			pg += fmt.Sprintf(" (%d of its processes exited: their CPU is not counted)", c.PostgresExited)
		}
	}
	machine := "machine CPU missing (" + c.MachineMissing + ")"
	if c.Machine != nil {
		machine = c.Machine.Sentence()
	}
	return fmt.Sprintf("%s; %s; %s; %s (%d decided, %d requests in %.1f s); %s",
		part("bidgate", c.Server, c.ServerMissing, cells[0], cells[1], "decided bid"),
		part("bidbench", c.Generator, c.GenMissing, cells[2], cells[3], "request"),
		part("Redis", c.Redis, c.RedisMissing, cells[4], cells[5], "decided bid"),
		pg, c.Decided, c.Requests, c.WallSeconds, machine)
}

// cpuMeter takes cpuSamples: it scrapes the nodes' Prometheus endpoints,
// reads this process's rusage, Redis's INFO cpu, and PostgreSQL's and the
// machine's from /proc.
type cpuMeter struct {
	urls   []string // http://ip:port/metrics, loopback
	noURLs string   // why there are none
	client *http.Client
	rdb    redis.UniversalClient // nil: Redis is not measured
}

// loopbackHTTPClient talks only to the address in the URL: no proxy, no
// redirect (which could lead off loopback).
func loopbackHTTPClient() *http.Client {
	return &http.Client{
		Timeout:       5 * time.Second,
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sample reads every counter; the nodes are scraped concurrently.
func (m *cpuMeter) sample(ctx context.Context) cpuSample {
	s := cpuSample{at: time.Now(), machine: readMachine()}
	s.self, s.selfErr = selfCPUSeconds()
	s.pg, s.pgErr = postgresCPU()
	if m == nil {
		s.nodesErr, s.redisErr = errors.New("not measured"), errors.New("not measured")
		return s
	}
	var wg sync.WaitGroup
	if m.rdb != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.redis, s.redisErr = redisCPUSeconds(ctx, m.rdb)
		}()
	} else {
		s.redisErr = errors.New("no Redis to ask")
	}
	s.nodes = make([]float64, len(m.urls))
	errs := make([]error, len(m.urls))
	for i, u := range m.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.nodes[i], errs[i] = scrapeCPU(ctx, m.client, u)
		}()
	}
	wg.Wait()
	if len(m.urls) == 0 {
		s.nodesErr = errors.New(m.noURLs)
	}
	// On one line, unlike errors.Join: it goes into a report's line.
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		s.nodesErr = errors.New(strings.Join(msgs, "; "))
	}
	return s
}

// scrapeCPU reads process_cpu_seconds_total from one Prometheus endpoint.
func scrapeCPU(ctx context.Context, client *http.Client, u string) (float64, error) {
	return scrapeSum(ctx, client, u, "process_cpu_seconds_total")
}

// scrapeSum reads one metric family from a Prometheus endpoint, its
// series summed.
func scrapeSum(ctx context.Context, client *http.Client, u, family string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", u, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", u, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", u, err)
	}
	f := families[family]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("scrape %s: no %s (not a bidgate node's /metrics?)", u, family)
	}
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, nil
}

// residentBytes is the nodes' process_resident_memory_bytes, summed.
func (m *cpuMeter) residentBytes(ctx context.Context) (float64, error) {
	if m == nil || len(m.urls) == 0 {
		if m == nil {
			return 0, errors.New("not measured")
		}
		return 0, errors.New(m.noURLs)
	}
	var sum float64
	for _, u := range m.urls {
		v, err := scrapeSum(ctx, m.client, u, "process_resident_memory_bytes")
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// redisCPUSeconds is used_cpu_sys + used_cpu_user, summed over the shards
// of a Redis Cluster.
func redisCPUSeconds(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var (
			mu  sync.Mutex
			sum float64
		)
		err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			v, err := redisCPUOf(ctx, c)
			mu.Lock()
			sum += v
			mu.Unlock()
			return err
		})
		return sum, err
	}
	return redisCPUOf(ctx, rdb)
}

func redisCPUOf(ctx context.Context, c redis.Cmdable) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
	return parseRedisCPU(info)
}

// parseRedisCPU reads used_cpu_sys and used_cpu_user from INFO's text.
func parseRedisCPU(info string) (float64, error) {
	var sum float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redis INFO cpu: %s: %w", k, err)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, errors.New("redis INFO cpu has no used_cpu_sys and used_cpu_user")
	}
	return sum, nil
}

// ParseMetricsURLs parses a comma-separated list of Prometheus endpoints
// (http://host:port or http://host:port/path; /metrics when no path is
// given). Like targets, they must be on loopback; the URLs returned name
// the resolved address.
func ParseMetricsURLs(ctx context.Context, list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, addr, err := parseLoopbackURL(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("--metrics %q: %w (want a URL such as http://127.0.0.1:8380/metrics)", s, err)
		}
		path := u.EscapedPath()
		if path == "" || path == "/" {
			path = "/metrics"
		}
		out = append(out, "http://"+addr+path)
	}
	return out, nil
}

// devAdminOffset is where bidgate dev puts a node's admin endpoint: its
// public port + 300 (cmd/bidgate/dev.go).
const devAdminOffset = 300

// devAdmin is the admin base URL of the node whose public API is at
// hostport (ip:port), as bidgate dev lays the ports out.
func devAdmin(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p+devAdminOffset > 65535 {
		return "", fmt.Errorf("port %q has no admin port %d above it", port, devAdminOffset)
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p+devAdminOffset)), nil
}

// operatorUser is the subject of the operator token bidbench asks the
// cluster's members with.
const operatorUser = 1

// discoverMetrics finds the nodes' metrics URLs the way bidgate dev lays
// its ports out: each target's admin endpoint, and the admin endpoint of
// every member its GET /cluster/members lists (the members list only
// public and internal addresses, so the admin port is derived there too).
// The whole cluster is measured even when the load goes through one node.
func discoverMetrics(ctx context.Context, client *http.Client, targets []Target, tokens *Tokens) (urls []string, notes []string) {
	seen := map[string]bool{}
	add := func(admin string) {
		if u := admin + "/metrics"; !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	var admins []string
	for _, t := range targets {
		a, err := devAdmin(t.Addr)
		if err != nil {
			notes = append(notes, fmt.Sprintf("server CPU: no admin endpoint for target %s: %v", t.Base, err))
			continue
		}
		admins = append(admins, a)
		add(a)
	}
	// One member list is the whole cluster; the first admin that answers
	// gives it.
	var listErr error
	for _, a := range admins {
		members, err := clusterMembers(ctx, client, a, tokens)
		if err != nil {
			listErr = errors.Join(listErr, fmt.Errorf("%s: %w", a, err))
			continue
		}
		listErr = nil
		for _, m := range members {
			ip, err := loopbackIP(ctx, hostOf(m))
			if err != nil {
				notes = append(notes, fmt.Sprintf("server CPU: member %s left out: %v", m, err))
				continue
			}
			_, port, _ := net.SplitHostPort(m)
			ma, err := devAdmin(net.JoinHostPort(ip.String(), port))
			if err != nil {
				notes = append(notes, fmt.Sprintf("server CPU: member %s left out: %v", m, err))
				continue
			}
			add(ma)
		}
		break
	}
	if listErr != nil {
		notes = append(notes, fmt.Sprintf("server CPU: no node listed the cluster's members (%v): measuring the targets' nodes only", listErr))
	}
	return urls, notes
}

func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}

// clusterMembers is the public addresses GET admin/cluster/members lists.
func clusterMembers(ctx context.Context, client *http.Client, admin string, tokens *Tokens) ([]string, error) {
	bearer, err := tokens.Header(operatorUser, auth.ScopeOperator)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/cluster/members", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", string(bearer))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var list struct {
		Members []struct {
			PublicAddr string `json:"publicAddr"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("not a member list: %w", err)
	}
	var out []string
	for _, m := range list.Members {
		if m.PublicAddr != "" {
			out = append(out, m.PublicAddr)
		}
	}
	return out, nil
}
