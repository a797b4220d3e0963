package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
		{name: "defaults", listen: ":8080", timeout: 5 * time.Second},
		{name: "environment", env: map[string]string{"BIDGATE_LISTEN": ":9000", "BIDGATE_REQUEST_TIMEOUT": "2s"}, listen: ":9000", timeout: 2 * time.Second},
		{name: "flag wins over environment", env: map[string]string{"BIDGATE_LISTEN": ":9000"}, args: []string{"--listen", ":9001"}, listen: ":9001", timeout: 5 * time.Second},
		{name: "bad environment value", env: map[string]string{"BIDGATE_REQUEST_TIMEOUT": "soon"}, wantErr: true},
		{name: "pool size out of range", args: []string{"--postgres-conns", "0"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
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
			if cfg.Listen != c.listen || cfg.RequestTimeout != c.timeout {
				t.Fatalf("listen %q timeout %v, want %q %v", cfg.Listen, cfg.RequestTimeout, c.listen, c.timeout)
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
			if cfg.JWTIssuer != c.issuer || cfg.JWTAudience != c.audience {
				t.Fatalf("issuer %q audience %q, want %q %q", cfg.JWTIssuer, cfg.JWTAudience, c.issuer, c.audience)
			}
		})
	}
}

// clusterArgs are a gossip key and a cluster secret for tests' nodes.
var clusterArgs = []string{
	"--cluster-key", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	"--cluster-secret", "a cluster secret of the tests",
}

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
