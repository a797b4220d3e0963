package validate

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The tests run in deploy/validate: the deploy tree is one level up and the
// repository (bidgate's sources) two.
const (
	deployDir = ".."
	repoRoot  = "../.."
)

func deployPath(parts ...string) string {
	return filepath.Join(append([]string{deployDir}, parts...)...)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveFlagsFile lists the flags of `bidgate serve`, one a line; a test of
// cmd/bidgate keeps it equal to the flags the command defines, so that a
// renamed flag fails these tests.
var serveFlagsFile = filepath.Join(repoRoot, "cmd", "bidgate", "testdata", "serve-flags.txt")

// serveFlags are the flags of `bidgate serve`, read from serveFlagsFile.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	for _, name := range strings.Fields(string(readFile(t, serveFlagsFile))) {
		flags[name] = true
	}
	if len(flags) < 40 || !flags["cluster-key"] || !flags["admin-listen"] {
		t.Fatalf("found only %d flags in %s: has its format changed?", len(flags), serveFlagsFile)
	}
	return flags
}

// flagOfEnv maps BIDGATE_SOME_NAME to some-name, as bidgate does.
func flagOfEnv(env string) (string, bool) {
	name, ok := strings.CutPrefix(env, "BIDGATE_")
	if !ok {
		return "", false
	}
	return strings.ToLower(strings.ReplaceAll(name, "_", "-")), true
}

// checkBidgateEnv fails for a BIDGATE_* variable that is no flag, and for
// the development-only settings no deployment may carry.
func checkBidgateEnv(t *testing.T, where string, env map[string]string) {
	t.Helper()
	flags := serveFlags(t)
	for k, v := range env {
		flag, ok := flagOfEnv(k)
		if !ok {
			continue
		}
		if !flags[flag] {
			t.Errorf("%s: %s is not a flag of bidgate serve (--%s)", where, k, flag)
		}
		switch {
		case flag == "auth" && v != "on":
			t.Errorf("%s: %s=%s turns token verification off", where, k, v)
		case flag == "insecure-cluster" || flag == "dev-key":
			t.Errorf("%s: %s is development only", where, k)
		}
	}
}

var metricDef = regexp.MustCompile(`(?s)(Counter|Gauge|Histogram|Summary)Opts\{\s*Name:\s*"(bidgate_[a-z0-9_]+)"`)

// processMetrics are the process collector's series that bidgate serve
// registers (collectors.NewProcessCollector in cmd/bidgate/serve.go), as a
// scrape of a running node lists them; up is Prometheus's own.
var processMetrics = []string{
	"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
	"process_open_fds", "process_max_fds", "process_start_time_seconds", "up",
}

// knownMetrics are the series names a query may use: every bidgate_ metric
// the code registers (a histogram as its _bucket, _sum and _count series)
// and processMetrics.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	count := 0
	for _, dir := range []string{"gateway", "shard", "persist", "closer", "fanout", "ring", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			for _, m := range metricDef.FindAllSubmatch(readFile(t, path), -1) {
				kind, name := string(m[1]), string(m[2])
				count++
				switch kind {
				case "Histogram", "Summary":
					known[name+"_sum"], known[name+"_count"] = true, true
					if kind == "Histogram" {
						known[name+"_bucket"] = true
					}
				default:
					known[name] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if count < 40 {
		t.Fatalf("found only %d bidgate metrics in the code: has their definition changed?", count)
	}
	serve := readFile(t, filepath.Join(repoRoot, "cmd", "bidgate", "serve.go"))
	if !strings.Contains(string(serve), "collectors.NewProcessCollector") {
		t.Fatal("bidgate serve no longer registers the process collector: process_* metrics are gone")
	}
	for _, m := range processMetrics {
		known[m] = true
	}
	return known
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricWord = regexp.MustCompile(`\b(?:bidgate_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+|up)\b`)
)

// metricsIn lists the series names a PromQL expression reads.
func metricsIn(expr string) []string {
	expr = quoted.ReplaceAllString(expr, `""`) // label values such as job="bidgate"
	var out []string
	for _, m := range metricWord.FindAllString(expr, -1) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// checkMetrics fails for a series name that bidgate does not export and
// returns the names used.
func checkMetrics(t *testing.T, where string, exprs []string) []string {
	t.Helper()
	known := knownMetrics(t)
	var used []string
	for _, e := range exprs {
		names := metricsIn(e)
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, e)
		}
		for _, n := range names {
			if !known[n] {
				t.Errorf("%s: %s is not a metric bidgate exports (in %q)", where, n, e)
			}
			if !slices.Contains(used, n) {
				used = append(used, n)
			}
		}
	}
	sort.Strings(used)
	return used
}

func TestMetricNamesComeFromTheCode(t *testing.T) {
	known := knownMetrics(t)
	for _, m := range []string{"bidgate_unpersisted_bids", "bidgate_unpersisted_oldest_seconds",
		"bidgate_unpersisted_lost_bids", "bidgate_relay_lag_seconds", "bidgate_outbox_pending",
		"bidgate_http_requests_total", "bidgate_bid_duration_seconds_bucket", "bidgate_ring_alive_members"} {
		if !known[m] {
			t.Errorf("%s is not registered by the code", m)
		}
	}
	if got := metricsIn(`sum(rate(bidgate_http_requests_total{status=~"5..",job="bidgate"}[5m])) / up`); !slices.Equal(got, []string{"bidgate_http_requests_total", "up"}) {
		t.Errorf("metricsIn: %v", got)
	}
}

// TestServeHelpListsTheFlags compares the flags read from the source with a
// built binary's `serve --help`; BIDGATE_BIN names the binary (make
// test-deploy builds it and sets it).
func TestServeHelpListsTheFlags(t *testing.T) {
	bin := os.Getenv("BIDGATE_BIN")
	if bin == "" {
		missing(t, "BIDGATE_BIN does not name a bidgate binary (make test-deploy builds one and sets it)")
	}
	out := runHelp(t, bin)
	flags := serveFlags(t)
	help := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(out, -1) {
		help[m[1]] = true
	}
	for f := range flags {
		if !help[f] {
			t.Errorf("--%s listed in %s but not in serve --help", f, serveFlagsFile)
		}
	}
	for f := range help {
		if !flags[f] {
			t.Errorf("--%s in serve --help but not listed in %s", f, serveFlagsFile)
		}
	}
}

// strictYAML decodes YAML into v the way the API server does: field names
// match case-sensitively, and an unknown or repeated field is an error.
// (encoding/json, and so yaml.UnmarshalStrict, would accept "clusterIp"
// for "clusterIP".)
func strictYAML(b []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
