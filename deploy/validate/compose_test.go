package validate

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

var composeNodes = []string{"node1", "node2", "node3"}

func loadCompose(envFile string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{deployPath("compose", "compose.yaml")},
		cli.WithWorkingDirectory(deployPath("compose")),
		cli.WithEnvFiles(envFile),
		cli.WithDotEnv, // the env file only: the machine's environment stays out
		cli.WithName("bidgate"),
	)
	if err != nil {
		return nil, err
	}
	return cli.ProjectFromOptions(context.Background(), opts)
}

// envMap flattens a service's environment (a nil value is unset).
func envMap(s types.ServiceConfig) map[string]string {
	m := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			m[k] = *v
		}
	}
	return m
}

// dotenv reads KEY=VALUE lines.
func dotenv(t *testing.T, path string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(string(readFile(t, path)), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, l)
		}
		m[k] = v
	}
	return m
}

func TestComposeLoads(t *testing.T) {
	example := deployPath("compose", ".env.example")
	p, err := loadCompose(example)
	if err != nil {
		t.Fatalf("load compose.yaml with .env.example: %v", err)
	}
	for _, want := range append([]string{"postgres", "redis", "kafka", "prometheus", "grafana"}, composeNodes...) {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	checkComposeNodes(t, p)
	checkComposeStores(t, p)
	checkComposeMonitoring(t, p)
	checkBindMounts(t, p)

	// The examples are placeholders that bidgate refuses (not hex), so a
	// stack started with them fails instead of running on a known key.
	env := dotenv(t, example)
	for _, k := range []string{"BIDGATE_CLUSTER_KEY", "BIDGATE_CLUSTER_SECRET", "BIDGATE_EVENT_SIGNING_KEY", "POSTGRES_PASSWORD", "REDIS_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} {
		if !strings.Contains(env[k], "replace") {
			t.Errorf(".env.example: %s=%q should be a placeholder", k, env[k])
		}
	}
	if env["BIDGATE_JWT_JWKS_URL"] != "" && env["BIDGATE_JWT_JWKS_FILE"] != "" {
		t.Error(".env.example sets both a JWKS URL and a JWKS file: bidgate takes only one")
	}
}

// TestComposeSecretsComeFromTheEnvFile: the secrets in the services are
// the env file's, and the file is required for them.
func TestComposeSecretsComeFromTheEnvFile(t *testing.T) {
	values := dotenv(t, deployPath("compose", ".env.example"))
	values["BIDGATE_CLUSTER_KEY"] = "11" + strings.Repeat("ab", 31)
	values["BIDGATE_CLUSTER_SECRET"] = "test-secret-from-env-file"
	values["BIDGATE_EVENT_SIGNING_KEY"] = "dGVzdCBldmVudCBrZXkgZnJvbSB0aGUgZW52IGZpbGU="
	values["POSTGRES_PASSWORD"] = "pgpass"
	values["REDIS_PASSWORD"] = "redispass"
	var b strings.Builder
	for k, v := range values {
		b.WriteString(k + "=" + v + "\n")
	}
	f := filepath.Join(t.TempDir(), "test.env")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := loadCompose(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range composeNodes {
		env := envMap(p.Services[n])
		if env["BIDGATE_CLUSTER_KEY"] != values["BIDGATE_CLUSTER_KEY"] || env["BIDGATE_CLUSTER_SECRET"] != values["BIDGATE_CLUSTER_SECRET"] ||
			env["BIDGATE_EVENT_SIGNING_KEY"] != values["BIDGATE_EVENT_SIGNING_KEY"] ||
			env["BIDGATE_REDIS_PASSWORD"] != "redispass" || !strings.Contains(env["BIDGATE_POSTGRES_URL"], ":pgpass@") {
			t.Errorf("%s: secrets do not follow the env file", n)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCompose(empty); err == nil || !regexp.MustCompile(`BIDGATE_CLUSTER_KEY|BIDGATE_CLUSTER_SECRET|PASSWORD|BIDGATE_JWT`).MatchString(err.Error()) {
		t.Errorf("compose.yaml loads without the secrets: %v", err)
	}
}

func checkComposeNodes(t *testing.T, p *types.Project) {
	t.Helper()
	backend, ok := p.Networks["backend"]
	if !ok || !backend.Internal {
		t.Error("the backend network (stores, gossip, admin) must be internal")
	}
	ips := map[string]string{}
	for _, n := range composeNodes {
		s := p.Services[n]
		if net, ok := s.Networks["backend"]; ok && net != nil {
			ips[n] = net.Ipv4Address
		}
	}
	ids := map[string]bool{}
	for _, n := range composeNodes {
		s := p.Services[n]
		env := envMap(s)
		checkBidgateEnv(t, "compose "+n, env)
		if id := env["BIDGATE_NODE_ID"]; id == "" || ids[id] {
			t.Errorf("%s: BIDGATE_NODE_ID %q empty or repeated", n, id)
		} else {
			ids[id] = true
		}
		if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: want build with deploy/Dockerfile", n)
		}
		for _, k := range []string{"BIDGATE_ADMIN_LISTEN", "BIDGATE_INTERNAL_LISTEN"} {
			host, _, err := net.SplitHostPort(env[k])
			if err != nil || host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" {
				t.Errorf("%s: %s=%q must be reachable from the other containers", n, k, env[k])
			}
		}
		// Gossip: a fixed IP on the backend network, the others as seeds.
		bind := env["BIDGATE_GOSSIP_BIND"]
		if bind == "" || bind != ips[n] {
			t.Errorf("%s: BIDGATE_GOSSIP_BIND %q is not its backend address %q", n, bind, ips[n])
		}
		if backend.Ipam.Config == nil || len(backend.Ipam.Config) == 0 {
			t.Fatal("the backend network needs a fixed subnet for the gossip addresses")
		}
		_, subnet, err := net.ParseCIDR(backend.Ipam.Config[0].Subnet)
		if err != nil || !subnet.Contains(net.ParseIP(bind)) {
			t.Errorf("%s: %s is outside the backend subnet %s", n, bind, backend.Ipam.Config[0].Subnet)
		}
		port := env["BIDGATE_GOSSIP_PORT"]
		var want []string
		for _, o := range composeNodes {
			if o != n {
				want = append(want, ips[o]+":"+port)
			}
		}
		seeds := strings.Split(env["BIDGATE_SEEDS"], ",")
		slices.Sort(seeds)
		slices.Sort(want)
		if !slices.Equal(seeds, want) {
			t.Errorf("%s: BIDGATE_SEEDS %v, want the other nodes %v", n, seeds, want)
		}
		// Stop: leave (5 s) and drain (--shutdown-timeout) before SIGKILL.
		drain, err := time.ParseDuration(env["BIDGATE_SHUTDOWN_TIMEOUT"])
		if err != nil {
			t.Errorf("%s: BIDGATE_SHUTDOWN_TIMEOUT: %v", n, err)
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= drain+5*time.Second {
			t.Errorf("%s: stop_grace_period must exceed the leave (5 s) and the drain (%v)", n, drain)
		}
		// Only the API is published, on the configured address.
		if len(s.Ports) != 1 || s.Ports[0].Target != 8080 {
			t.Errorf("%s: publish the API port only, got %+v", n, s.Ports)
		}
		if !s.ReadOnly || s.User == "" || strings.HasPrefix(s.User, "0") || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: run read-only, as a non-root user, with every capability dropped", n)
		}
		for _, dep := range []string{"postgres", "redis"} {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: must wait for %s to be healthy (it exits if the store does not answer)", n, dep)
			}
		}
		if env["BIDGATE_KAFKA"] == "" {
			t.Errorf("%s: BIDGATE_KAFKA empty would start the in-memory embedded broker", n)
		}
	}
}

// maxConnections reads max_connections from deploy/stores/postgresql.conf.
func maxConnections(t *testing.T) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^max_connections\s*=\s*(\d+)`).FindSubmatch(readFile(t, deployPath("stores", "postgresql.conf")))
	if m == nil {
		t.Fatal("postgresql.conf: no max_connections")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func checkComposeStores(t *testing.T, p *types.Project) {
	t.Helper()
	pg := p.Services["postgres"]
	if !strings.HasPrefix(pg.Image, "postgres:15") {
		t.Errorf("postgres image %q, want PostgreSQL 15", pg.Image)
	}
	cmd := strings.Join(pg.Command, " ")
	m := regexp.MustCompile(`max_connections=(\d+)`).FindStringSubmatch(cmd)
	if m == nil {
		t.Fatal("postgres: no -c max_connections")
	}
	maxConns, _ := strconv.Atoi(m[1])
	if want := maxConnections(t); maxConns != want {
		t.Errorf("postgres: max_connections=%d, stores/postgresql.conf says %d", maxConns, want)
	}
	pool, _ := strconv.Atoi(envMap(p.Services["node1"])["BIDGATE_POSTGRES_CONNS"])
	if need := len(composeNodes)*pool + pool + 10; pool == 0 || maxConns < need {
		t.Errorf("max_connections %d < %d nodes x %d + one more node + 10 headroom", maxConns, len(composeNodes), pool)
	}

	redis := p.Services["redis"]
	if !strings.HasPrefix(redis.Image, "redis:7") {
		t.Errorf("redis image %q, want Redis 7", redis.Image)
	}
	conf := ""
	for _, v := range redis.Volumes {
		if v.Type == types.VolumeTypeBind && filepath.Base(v.Source) == "redis.conf" {
			conf = v.Target
			if !sameFile(v.Source, deployPath("stores", "redis.conf")) {
				t.Errorf("redis mounts %s, not deploy/stores/redis.conf", v.Source)
			}
		}
	}
	if conf == "" || !slices.Contains(redis.Command, conf) {
		t.Errorf("redis must run with deploy/stores/redis.conf (mounted at %q, command %v)", conf, redis.Command)
	}

	kafka := p.Services["kafka"]
	env := envMap(kafka)
	if !strings.HasPrefix(kafka.Image, "apache/kafka:") {
		t.Errorf("kafka image %q, want apache/kafka", kafka.Image)
	}
	roles := strings.Split(env["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") {
		t.Errorf("kafka: KAFKA_PROCESS_ROLES=%q, want KRaft broker,controller", env["KAFKA_PROCESS_ROLES"])
	}
	for _, k := range []string{"KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_CONTROLLER_LISTENER_NAMES", "CLUSTER_ID", "KAFKA_ADVERTISED_LISTENERS"} {
		if env[k] == "" {
			t.Errorf("kafka: %s is required in KRaft mode", k)
		}
	}
	for k := range env {
		if strings.Contains(k, "ZOOKEEPER") {
			t.Errorf("kafka: %s: KRaft needs no ZooKeeper", k)
		}
	}
	broker := strings.TrimPrefix(env["KAFKA_ADVERTISED_LISTENERS"], "PLAINTEXT://")
	if got := envMap(p.Services["node1"])["BIDGATE_KAFKA"]; got != broker {
		t.Errorf("nodes use Kafka at %q, the broker advertises %q", got, broker)
	}
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

func checkComposeMonitoring(t *testing.T, p *types.Project) {
	t.Helper()
	prom := p.Services["prometheus"]
	mounted := map[string]string{} // target -> source
	for _, v := range prom.Volumes {
		if v.Type == types.VolumeTypeBind {
			mounted[filepath.Base(v.Target)] = v.Source
		}
	}
	for _, f := range []string{"prometheus.yml", "alerts.yml"} {
		if !sameFile(mounted[f], deployPath("prometheus", f)) {
			t.Errorf("prometheus does not mount deploy/prometheus/%s", f)
		}
	}
	// The scrape targets are the nodes' admin listeners.
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, deployPath("prometheus", "prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "bidgate" {
			for _, s := range sc.StaticConfigs {
				targets = append(targets, s.Targets...)
			}
		}
	}
	var want []string
	for _, n := range composeNodes {
		_, port, _ := net.SplitHostPort(envMap(p.Services[n])["BIDGATE_ADMIN_LISTEN"])
		want = append(want, n+":"+port)
	}
	slices.Sort(targets)
	if !slices.Equal(targets, want) {
		t.Errorf("prometheus.yml scrapes %v, want every node's admin listener %v", targets, want)
	}
	if !sharesNetwork(prom, p.Services["node1"]) {
		t.Error("prometheus cannot reach the nodes: no common network")
	}

	graf := p.Services["grafana"]
	gm := map[string]string{}
	for _, v := range graf.Volumes {
		if v.Type == types.VolumeTypeBind {
			gm[v.Target] = v.Source
		}
	}
	if !sameFile(gm["/etc/grafana/provisioning"], deployPath("grafana", "provisioning")) {
		t.Error("grafana does not mount deploy/grafana/provisioning at /etc/grafana/provisioning")
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, deployPath("grafana", "provisioning", "dashboards", "bidgate.yaml")), &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Providers) != 1 || !sameFile(gm[prov.Providers[0].Options.Path], deployPath("grafana", "dashboards")) {
		t.Error("the dashboard provider's path is not where deploy/grafana/dashboards is mounted")
	}
	if !sharesNetwork(graf, prom) {
		t.Error("grafana cannot reach prometheus: no common network")
	}
	if env := envMap(graf); !strings.HasPrefix(env["GF_SECURITY_ADMIN_PASSWORD"], "replace") {
		t.Errorf("grafana's admin password should come from the env file")
	}
}

func sharesNetwork(a, b types.ServiceConfig) bool {
	for n := range a.Networks {
		if _, ok := b.Networks[n]; ok {
			return true
		}
	}
	return false
}

func checkBindMounts(t *testing.T, p *types.Project) {
	t.Helper()
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s: %v", name, v.Source, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s writable: configuration is read-only", name, v.Source)
			}
		}
	}
}
