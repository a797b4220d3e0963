package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"bidgate/gateway"
	"bidgate/internal/auth"
)

func TestConfigFlagsAndEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		listen  string
		timeout time.Duration
		wantErr bool
	}{
		{name: "defaults", listen: ":8080", timeout: gateway.DefaultConfig().RequestTimeout},
		{name: "environment", env: map[string]string{"BIDGATE_LISTEN": ":9000", "BIDGATE_REQUEST_TIMEOUT": "2s"}, listen: ":9000", timeout: 2 * time.Second},
		{name: "flag wins over environment", env: map[string]string{"BIDGATE_LISTEN": ":9000"}, args: []string{"--listen", ":9001"}, listen: ":9001", timeout: gateway.DefaultConfig().RequestTimeout},
		{name: "bad environment value", env: map[string]string{"BIDGATE_REQUEST_TIMEOUT": "soon"}, wantErr: true},
		{name: "pool size out of range", args: []string{"--postgres-conns", "0"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
		{name: "store timeout not below request timeout", args: []string{"--request-timeout", "1s", "--store-timeout", "1s"}, wantErr: true},
		{name: "store timeout below request timeout", args: []string{"--request-timeout", "1s", "--store-timeout", "900ms", "--cold-lock-timeout", "400ms"}, listen: ":8080", timeout: time.Second},
	}
	key := filepath.Join(t.TempDir(), "dev-key.pem")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseConfig("serve", append(append([]string{"--dev-key", key}, clusterArgs...), c.args...))
			if c.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTP.Listen != c.listen || cfg.HTTP.RequestTimeout != c.timeout {
				t.Fatalf("listen %q timeout %v, want %q %v", cfg.HTTP.Listen, cfg.HTTP.RequestTimeout, c.listen, c.timeout)
			}
		})
	}
}

// The read replica is off by default; its URL and lag bound come from
// flags or the environment, and a bad value names its flag.
func TestConfigReadReplica(t *testing.T) {
	const standby = "postgres://reader@standby.test:5432/bidgate?sslmode=verify-full"
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		url    string
		maxLag time.Duration
		err    string // a part of the error; empty: none
	}{
		{name: "defaults: no replica", maxLag: time.Second},
		{name: "flags", args: []string{"--postgres-read-url", standby, "--read-max-lag", "250ms"}, url: standby, maxLag: 250 * time.Millisecond},
		{name: "environment", env: map[string]string{"BIDGATE_POSTGRES_READ_URL": standby, "BIDGATE_READ_MAX_LAG": "3s"}, url: standby, maxLag: 3 * time.Second},
		{name: "zero lag bound", args: []string{"--read-max-lag", "0s"}, err: "--read-max-lag must be positive"},
		{name: "unparsable URL", args: []string{"--postgres-read-url", "postgres://reader:hunter2@[::1/bidgate"}, err: "--postgres-read-url cannot be parsed"},
	}
	key := filepath.Join(t.TempDir(), "dev-key.pem")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseConfig("serve", append(append([]string{"--dev-key", key}, clusterArgs...), c.args...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one about %q", err, c.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Postgres.Read.URL != c.url || cfg.Postgres.Read.MaxLag != c.maxLag {
				t.Fatalf("read URL %q max lag %v, want %q %v", cfg.Postgres.Read.URL, cfg.Postgres.Read.MaxLag, c.url, c.maxLag)
			}
		})
	}
}

// A node that serves the API verifies tokens: from a JWKS file or URL with
// an issuer and an audience, or from the dev key (dev issuer and audience).
func TestConfigTokenVerification(t *testing.T) {
	dir := t.TempDir()
	key, jwks := filepath.Join(dir, "dev-key.pem"), filepath.Join(dir, "jwks.json")
	const url = "https://issuer.test/.well-known/jwks.json"
	cases := []struct {
		name     string
		env      map[string]string
		args     []string
		issuer   string
		audience string
		err      string // a part of the error; empty: none
	}{
		{name: "no key source", err: "--jwt-jwks-file or --jwt-jwks-url"},
		{name: "dev key", args: []string{"--dev-key", key}, issuer: auth.DevIssuer, audience: auth.DevAudience},
		{name: "dev key from the environment", env: map[string]string{"BIDGATE_DEV_KEY": key}, issuer: auth.DevIssuer, audience: auth.DevAudience},
		{name: "dev key with another audience", args: []string{"--dev-key", key, "--jwt-audience", "other"}, issuer: auth.DevIssuer, audience: "other"},
		{name: "JWKS file", args: []string{"--jwt-jwks-file", jwks, "--jwt-issuer", "iss", "--jwt-audience", "aud"}, issuer: "iss", audience: "aud"},
		{name: "JWKS URL", args: []string{"--jwt-jwks-url", url, "--jwt-issuer", "iss", "--jwt-audience", "aud"}, issuer: "iss", audience: "aud"},
		{name: "JWKS file without issuer", args: []string{"--jwt-jwks-file", jwks, "--jwt-audience", "aud"}, err: "--jwt-issuer and --jwt-audience"},
		{name: "JWKS URL without audience", args: []string{"--jwt-jwks-url", url, "--jwt-issuer", "iss"}, err: "--jwt-issuer and --jwt-audience"},
		{name: "JWKS file and URL", args: []string{"--jwt-jwks-file", jwks, "--jwt-jwks-url", url, "--jwt-issuer", "iss", "--jwt-audience", "aud"}, err: "only one"},
		{name: "JWKS file and dev key", args: []string{"--jwt-jwks-file", jwks, "--dev-key", key}, err: "only one"},
		{name: "no gateway role", args: []string{"--roles", "shard,persister,closer,relay"}},
		{name: "auth off", args: []string{"--auth", "off"}},
		{name: "auth neither on nor off", args: []string{"--auth", "maybe", "--dev-key", key}, err: "--auth must be on or off"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseConfig("serve", append(slices.Clone(clusterArgs), c.args...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one about %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Auth.Issuer != c.issuer || cfg.Auth.Audience != c.audience {
				t.Fatalf("issuer %q audience %q, want %q %q", cfg.Auth.Issuer, cfg.Auth.Audience, c.issuer, c.audience)
			}
		})
	}
}

// clusterArgs are a gossip key, a cluster secret and an event-signing key
// for tests' nodes.
var clusterArgs = []string{
	"--cluster-key", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	"--cluster-secret", "a cluster secret of the tests",
	"--event-signing-key", testEventKey,
}

// testEventKey is the event-signing key of the tests' nodes (base64 of a
// 32-byte seed).
const testEventKey = "dGhlIGV2ZW50LXNpZ25pbmcga2V5IG9mIHRlc3RzISE="

// A node needs a gossip key and a cluster secret unless it is explicitly
// insecure; the key is checked.
func TestConfigClusterCredentials(t *testing.T) {
	key := filepath.Join(t.TempDir(), "dev-key.pem")
	cases := []struct {
		name string
		args []string
		err  string
	}{
		{"none", nil, "needs --cluster-key and --cluster-secret"},
		{"key only", []string{"--cluster-key", clusterArgs[1]}, "needs --cluster-key and --cluster-secret"},
		{"secret only", []string{"--cluster-secret", clusterArgs[3]}, "needs --cluster-key and --cluster-secret"},
		{"both", clusterArgs, ""},
		{"key not hex", []string{"--cluster-key", "zz", "--cluster-secret", clusterArgs[3]}, "--cluster-key must be"},
		{"key of 10 bytes", []string{"--cluster-key", "00112233445566778899", "--cluster-secret", clusterArgs[3]}, "--cluster-key must be"},
		{"short secret", []string{"--cluster-key", clusterArgs[1], "--cluster-secret", "short"}, "at least 16 bytes"},
		{"rotating", append(slices.Clone(clusterArgs), "--cluster-secret-previous", "the previous cluster secret"), ""},
		{"short previous secret", append(slices.Clone(clusterArgs), "--cluster-secret-previous", "short"), "--cluster-secret-previous"},
		{"previous secret alone", []string{"--insecure-cluster", "--cluster-secret-previous", "the previous cluster secret"}, "--cluster-secret-previous needs"},
		{"insecure", []string{"--insecure-cluster"}, ""},
		{"insecure joining without a secret", []string{"--insecure-cluster", "--seeds", "127.0.0.1:7946"}, "required to join a cluster"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig("serve", append([]string{"--dev-key", key}, c.args...))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
}

// A node that relays signs with the event-signing key and one that
// persists verifies, with it or with public keys alone; secure by default,
// --insecure-cluster lifts both. Keys are checked.
func TestConfigEventKeys(t *testing.T) {
	key := filepath.Join(t.TempDir(), "dev-key.pem")
	pub := "Rmw4dhQ0g7fTkZ3yh4s8MoxDAqL7yeQ0xJg4fbmTtTA="
	cases := []struct {
		name string
		args []string
		err  string
	}{
		{"every role, no key", nil, "needs --event-signing-key"},
		{"every role, only public keys", []string{"--event-verify-keys", pub}, "needs --event-signing-key"},
		{"every role, the key", []string{"--event-signing-key", testEventKey}, ""},
		{"a rotation", []string{"--event-signing-key", testEventKey, "--event-verify-keys", pub + "," + pub}, ""},
		{"persister, no key", []string{"--roles", "persister"}, "needs --event-verify-keys"},
		{"persister, only public keys", []string{"--roles", "persister", "--event-verify-keys", pub}, ""},
		{"gateway and shard need none", []string{"--roles", "gateway,shard"}, ""},
		{"key too short", []string{"--event-signing-key", "c2hvcnQ="}, "--event-signing-key: an event-signing key is the base64 of 32"},
		{"key not base64", []string{"--event-signing-key", "not base64!"}, "--event-signing-key"},
		{"public key bad", []string{"--event-signing-key", testEventKey, "--event-verify-keys", "c2hvcnQ="}, "--event-verify-keys"},
		{"insecure", []string{"--insecure-cluster"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--dev-key", key}, clusterArgs[:4]...)
			_, err := parseConfig("serve", append(args, c.args...))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
}

// Every command reads its flags from the environment too, not only serve;
// a flag on the command line wins.
func TestEveryCommandReadsTheEnvironment(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		got  func() (any, error)
		want any
	}{
		{"migrate", map[string]string{"BIDGATE_POSTGRES_CONNS": "7"}, func() (any, error) {
			c, err := parseConfig("migrate", nil)
			return c.Postgres.MaxConns, err
		}, 7},
		{"dev", map[string]string{"BIDGATE_NODES": "5", "BIDGATE_REDIS_ADDRS": "127.0.0.1:7000"}, func() (any, error) {
			c, err := parseDevConfig([]string{"--nodes", "4"})
			return fmt.Sprint(c.Nodes, " ", c.Redis.Addrs), err
		}, "4 127.0.0.1:7000"},
		{"broker", map[string]string{"BIDGATE_PARTITIONS": "3"}, func() (any, error) {
			c, err := parseBrokerConfig(nil)
			return c.Broker.Partitions, err
		}, 3},
		{"token", map[string]string{"BIDGATE_ISS": "another-issuer"}, func() (any, error) {
			c, err := parseTokenConfig([]string{"--sub", "42", "--scope", "bid"})
			return c.Signing.Issuer, err
		}, "another-issuer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			got, err := c.got()
			if err != nil || got != c.want {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestDevNodesShareTheCores(t *testing.T) {
	for _, tc := range []struct {
		set          string
		cores, nodes int
		want         int
		ok           bool
	}{
		{"", 2, 1, 0, false}, // a lone node keeps every core
		{"", 2, 2, 1, true},
		{"", 2, 3, 1, true}, // never below one
		{"", 8, 3, 2, true},
		{"4", 8, 3, 0, false}, // the user's GOMAXPROCS stands
	} {
		got, ok := coreShare(tc.set, tc.cores, tc.nodes)
		if got != tc.want || ok != tc.ok {
			t.Errorf("coreShare(%q, %d cores, %d nodes) = %d, %v; want %d, %v", tc.set, tc.cores, tc.nodes, got, ok, tc.want, tc.ok)
		}
	}
}

// Relay nodes keep published outbox rows a week unless told otherwise; 0
// keeps them for ever, and a negative retention is refused by name.
func TestConfigOutboxKeep(t *testing.T) {
	key := filepath.Join(t.TempDir(), "dev-key.pem")
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		keep time.Duration
		err  string
	}{
		{name: "default", keep: 7 * 24 * time.Hour},
		{name: "flag", args: []string{"--outbox-keep", "36h"}, keep: 36 * time.Hour},
		{name: "environment", env: map[string]string{"BIDGATE_OUTBOX_KEEP": "2h"}, keep: 2 * time.Hour},
		{name: "for ever", args: []string{"--outbox-keep", "0s"}, keep: 0},
		{name: "negative", args: []string{"--outbox-keep", "-1h"}, err: "--outbox-keep must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseConfig("serve", append(append([]string{"--dev-key", key}, clusterArgs...), c.args...))
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case cfg.Prune.Keep != c.keep:
				t.Fatalf("keep %v, want %v", cfg.Prune.Keep, c.keep)
			}
		})
	}
}
