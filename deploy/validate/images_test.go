package validate

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDockerfile(t *testing.T) {
	src := string(readFile(t, deployPath("Dockerfile")))
	var froms, users []string
	var entrypoint, cmd, expose string
	for _, l := range strings.Split(src, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), f[0]))
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, rest)
			users = nil // USER is per stage
		case "USER":
			users = append(users, rest)
		case "ENTRYPOINT":
			entrypoint = rest
		case "CMD":
			cmd = rest
		case "EXPOSE":
			expose = rest
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:1.26-bookworm ") ||
		froms[1] != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("stages %q: want golang:1.26-bookworm, then distroless/static:nonroot", froms)
	}
	if !strings.Contains(src, "CGO_ENABLED=0 go build -trimpath -o /bidgate ./cmd/bidgate") {
		t.Error("the build is not the static -trimpath build of ./cmd/bidgate")
	}
	if len(users) == 0 || users[len(users)-1] == "root" || strings.HasPrefix(users[len(users)-1], "0") {
		t.Errorf("the runtime stage runs as %v: want a non-root user", users)
	}
	if entrypoint != `["/bidgate"]` || cmd != `["serve"]` {
		t.Errorf("ENTRYPOINT %s CMD %s: want [\"/bidgate\"] [\"serve\"]", entrypoint, cmd)
	}
	for _, p := range []string{"8080", "8081", "9090", "7946", "7946/udp"} {
		if !strings.Contains(" "+expose+" ", " "+p+" ") {
			t.Errorf("EXPOSE %s lacks %s", expose, p)
		}
	}
	// The image's Go must be able to build the module.
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(readFile(t, repoRoot+"/go.mod")))
	if m == nil {
		t.Fatal("go.mod: no go line")
	}
	if major, _ := strconv.Atoi(m[1]); major != 1 {
		t.Fatalf("go.mod: go %s.%s", m[1], m[2])
	}
	if minor, _ := strconv.Atoi(m[2]); minor > 26 {
		t.Errorf("go.mod needs Go 1.%d; the Dockerfile builds with 1.26", minor)
	}
	ignore := string(readFile(t, deployPath("Dockerfile.dockerignore")))
	for _, want := range []string{".bidgate", ".git", "**/*.pem", "**/.env"} {
		if !strings.Contains(ignore, want+"\n") {
			t.Errorf("Dockerfile.dockerignore does not exclude %s", want)
		}
	}
}

// directives reads a redis.conf-style file: the first word of each line
// and the rest.
func directives(b []byte) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, " ")
		m[strings.ToLower(k)] = strings.TrimSpace(v)
	}
	return m
}

func TestStoreSettings(t *testing.T) {
	r := directives(readFile(t, deployPath("stores", "redis.conf")))
	for k, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"} {
		if r[k] != want {
			t.Errorf("redis.conf: %s %q, want %q", k, r[k], want)
		}
	}
	// max_connections covers 3 nodes at the default pool, one more node and
	// the reserved connections.
	pg := string(readFile(t, deployPath("stores", "postgresql.conf")))
	if n := maxConnections(t); n < 3*32+32+3 {
		t.Errorf("max_connections %d < 3 x 32 + 32 + 3", n)
	}
	if !strings.Contains(pg, "3 x 32 = 96") {
		t.Error("postgresql.conf: the arithmetic comment is gone")
	}
}

// TestShellScripts: deploy/'s scripts parse (bash -n) and pass shellcheck
// (Debian's shellcheck package; CI installs it).
func TestShellScripts(t *testing.T) {
	for _, script := range []string{deployPath("stores", "kafka-topics.sh"), deployPath("demo.sh")} {
		tool(t, "bash", "apt-get install bash", "-n", script)
		tool(t, "shellcheck", "apt-get install shellcheck", script)
	}
}
