package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"bidgate/internal/testcert"
	"bidgate/internal/testport"
	"bidgate/persist/pgstore"
)

// PostgreSQL over TLS is configured through the URL alone (sslmode,
// sslrootcert): against a server of the test's own that takes only TLS
// connections, bidgate connects with verify-full and migrates, and a
// plaintext connection is refused.
func TestPostgresTLSThroughTheURL(t *testing.T) {
	bins, err := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if err != nil || len(bins) == 0 {
		t.Fatal("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the postgres user, who runs the server: %v", err)
	}
	uid, err := strconv.Atoi(pg.Uid)
	if err != nil {
		t.Fatalf("uid of postgres: %v", err)
	}
	gid, err := strconv.Atoi(pg.Gid)
	if err != nil {
		t.Fatalf("gid of postgres: %v", err)
	}

	dir, err := os.MkdirTemp("", "bidgate-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	asPostgres := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	asPostgres("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	cert := writeServerCert(t, data, uid, gid)
	hba := "local all all trust\nhostssl all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testport.Free(t)
	asPostgres("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c ssl=on -c fsync=off", port, dir), "start")
	t.Cleanup(func() { asPostgres("pg_ctl", "-D", data, "-m", "immediate", "stop") })

	ctx := context.Background()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=verify-full&sslrootcert=%s", port, cert)
	db, err := pgstore.Open(ctx, pgstore.Config{URL: url, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := pgstore.Migrate(ctx, db); err != nil {
		t.Fatalf("migrate over TLS: %v", err)
	}
	var ssl bool
	if err := db.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl); err != nil || !ssl {
		t.Fatalf("connection encrypted: %v, %v", ssl, err)
	}
	plainURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if plain, err := pgstore.Open(ctx, pgstore.Config{URL: plainURL, MaxConns: 1}); err == nil {
		plain.Close()
		t.Fatal("a plaintext connection was accepted")
	}
}

// writeServerCert writes a test certificate as the server's (owned by the
// server's user, as PostgreSQL requires) and returns a copy clients trust.
func writeServerCert(t *testing.T, data string, uid, gid int) string {
	t.Helper()
	c := testcert.New(t)
	for name, b := range map[string][]byte{"server.crt": c.CertPEM, "server.key": c.KeyPEM} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}
