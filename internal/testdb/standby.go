package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"bidgate/internal/testenv"
	"bidgate/internal/testport"
	"bidgate/persist/pgstore"
)

// Pair is a PostgreSQL primary and a streaming standby of a test's own,
// each a server process on a loopback port, with database bidgate
// migrated on the primary (and so on the standby), its auction ids offset
// as New's are.
type Pair struct {
	PrimaryURL string // database bidgate on the primary
	StandbyURL string // the same database on the standby (read-only)

	bin     string // directory of initdb, pg_ctl, pg_basebackup
	dir     string // owned by the servers' user: both data directories, the socket, the logs
	cred    *syscall.Credential
	standby server
	running bool // the standby
}

// server is one postmaster's data directory and port.
type server struct {
	data string
	port int
}

// NewPair starts a primary (wal_level replica) and a standby made from it
// by pg_basebackup -R -X stream, and stops both when tb ends. Starting
// takes seconds: a test package shares one pair between its tests. Without
// PostgreSQL's server programs it skips, except in CI (internal/testenv).
func NewPair(tb testing.TB) *Pair {
	tb.Helper()
	bin := serverBinDir(tb)
	cred, uid, gid := serverUser(tb)
	dir, err := os.MkdirTemp("", "bidgate-standby-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.Chown(dir, uid, gid); err != nil {
		tb.Fatalf("give %s to the servers' user: %v", dir, err)
	}
	p := &Pair{bin: bin, dir: dir, cred: cred}
	primary := server{data: filepath.Join(dir, "primary"), port: testport.Free(tb)}
	p.standby = server{data: filepath.Join(dir, "standby"), port: testport.Free(tb)}

	p.run(tb, "initdb", "-D", primary.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	p.start(tb, primary, "-c wal_level=replica -c max_wal_senders=4")
	tb.Cleanup(func() { p.run(tb, "pg_ctl", "-D", primary.data, "-m", "immediate", "-w", "stop") })
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", primary.port)
	p.PrimaryURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/bidgate?sslmode=disable", primary.port)
	p.StandbyURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/bidgate?sslmode=disable", p.standby.port)
	migrate(tb, admin, p.PrimaryURL)

	p.run(tb, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", p.standby.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	p.StartStandby(tb)
	tb.Cleanup(func() {
		if p.running {
			p.StopStandby(tb)
		}
	})
	return p
}

// StopStandby stops the standby at once, as a crash would (pg_ctl stop -m
// immediate).
func (p *Pair) StopStandby(tb testing.TB) {
	tb.Helper()
	p.run(tb, "pg_ctl", "-D", p.standby.data, "-m", "immediate", "-w", "stop")
	p.running = false
}

// StartStandby starts the standby (again) and returns once it takes
// read-only connections; it resumes streaming from the primary.
func (p *Pair) StartStandby(tb testing.TB) {
	tb.Helper()
	p.start(tb, p.standby, "-c hot_standby=on")
	p.running = true
}

// start runs s's postmaster with the options every server of a pair has,
// and extra, and waits until it takes connections.
func (p *Pair) start(tb testing.TB, s server, extra string) {
	tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=40 -c fsync=off %s", s.port, p.dir, extra)
	log := s.data + ".log"
	if err := p.command("pg_ctl", "-D", s.data, "-l", log, "-w", "-t", "60", "-o", opts, "start"); err != nil {
		out, readErr := os.ReadFile(log)
		if readErr != nil {
			tb.Fatalf("%v (its log: %v)", err, readErr)
		}
		tb.Fatalf("%v\n%s", err, out)
	}
}

// run runs one of the server's programs as the servers' user, failing tb
// with its output when it fails.
func (p *Pair) run(tb testing.TB, name string, args ...string) {
	tb.Helper()
	if err := p.command(name, args...); err != nil {
		tb.Fatal(err)
	}
}

func (p *Pair) command(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}

// migrate creates database bidgate on the server of admin and migrates it.
func migrate(tb testing.TB, admin, dbURL string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminDB, err := pgstore.Open(ctx, pgstore.Config{URL: admin, MaxConns: 1})
	if err != nil {
		tb.Fatal(err)
	}
	_, err = adminDB.Exec(ctx, "CREATE DATABASE bidgate")
	adminDB.Close()
	if err != nil {
		tb.Fatalf("create database bidgate: %v", err)
	}
	db, err := pgstore.Open(ctx, pgstore.Config{URL: dbURL, MaxConns: 2})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := pgstore.Migrate(ctx, db); err != nil {
		tb.Fatalf("migrate the primary: %v", err)
	}
	offsetIDs(tb, ctx, db)
}

// serverBinDir is the newest installed PostgreSQL's bin directory.
func serverBinDir(tb testing.TB) string {
	tb.Helper()
	dirs, err := filepath.Glob("/usr/lib/postgresql/*/bin")
	if err != nil {
		tb.Fatal(err)
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool {
		for _, name := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
			if st, err := os.Stat(filepath.Join(d, name)); err != nil || !st.Mode().IsRegular() {
				return true
			}
		}
		return false
	})
	if len(dirs) == 0 {
		testenv.Missing(tb, "no PostgreSQL server programs (initdb, pg_ctl, pg_basebackup) in /usr/lib/postgresql/*/bin: install postgresql")
	}
	slices.SortFunc(dirs, func(a, b string) int { return majorVersion(b) - majorVersion(a) })
	return dirs[0]
}

func majorVersion(bin string) int {
	v, err := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	if err != nil {
		return 0
	}
	return v
}

// serverUser is who runs the servers: the postgres user when the test is
// root (initdb and the postmaster refuse root), else the test's own user
// (nil credential).
func serverUser(tb testing.TB) (*syscall.Credential, int, int) {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil, os.Geteuid(), os.Getegid()
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.Missing(tb, "running as root, the PostgreSQL servers need the postgres user: %v", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		tb.Fatalf("uid of postgres %q: %v", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		tb.Fatalf("gid of postgres %q: %v", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, uid, gid
}
