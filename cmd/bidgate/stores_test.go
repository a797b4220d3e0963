package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/settings"
	"bidgate/internal/testcert"
	"bidgate/internal/testport"
	"bidgate/persist/redisstore"
)

// openRedis connects to the Redis of r as a node does.
func openRedis(ctx context.Context, r settings.Redis) (redis.UniversalClient, error) {
	cfg, err := r.Config()
	if err != nil {
		return nil, err
	}
	return redisstore.Open(ctx, cfg)
}

// writeCert writes a test certificate and its key as PEM files; the
// certificate is also the CA clients trust.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	c := testcert.New(t)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, c.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// bidgate reaches a Redis of its own that takes only TLS and an ACL user
// (the default user off); without TLS, with a wrong password or as the
// default user it gets nowhere.
func TestRedisTLSAndACL(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed")
	}
	cert, key := writeCert(t)
	port := testport.Free(t)
	cmd := exec.Command(server, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--user", "default", "off", "--user", "bidgate", "on", ">s3cret-of-the-test", "~*", "&*", "+@all")
	cmd.Dir = t.TempDir()
	log, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// It logs this once it listens, and ends at once if it cannot.
	runProcess(t, "redis-server", cmd, log).await(t, "Ready to accept connections", 10*time.Second)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	good := settings.Redis{Addrs: addr, Username: "bidgate", Password: "s3cret-of-the-test", TLSCA: cert}
	rdb, err := openRedis(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if n, err := rdb.Eval(context.Background(), "return redis.call('INCR', KEYS[1])", []string{"bidgate:tls-test"}).Int(); err != nil || n != 1 {
		t.Fatalf("a script over TLS as the ACL user: %d, %v", n, err)
	}

	for name, cfg := range map[string]settings.Redis{
		"wrong password": {Addrs: addr, Username: "bidgate", Password: "guess", TLSCA: cert},
		"default user":   {Addrs: addr, TLSCA: cert},
		"plaintext":      {Addrs: addr, Username: "bidgate", Password: "s3cret-of-the-test"},
		"untrusted":      {Addrs: addr, Username: "bidgate", Password: "s3cret-of-the-test", TLS: true},
	} {
		t.Run(name, func(t *testing.T) {
			if rdb, err := openRedis(context.Background(), cfg); err == nil {
				rdb.Close()
				t.Fatal("connected")
			}
		})
	}
}
