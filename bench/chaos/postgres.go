//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgReadyLine is what the postmaster logs once it accepts connections.
const pgReadyLine = "database system is ready to accept connections"

// postgres is the harness's own PostgreSQL server: a data directory made by
// initdb in the stack's temporary directory and the postmaster run as a
// child process (so that its exit is seen and it dies with the harness).
// As root, initdb and the postmaster refuse to run, so they run as the
// postgres user, which owns the directory.
type postgres struct {
	bin  string // directory of initdb, pg_ctl, postgres
	dir  string // owned by the server's user: data/, sock/, the logs
	port int
	cred *syscall.Credential
	env  []string
	proc *proc
}

// postgresBinDir finds the newest installed PostgreSQL's bin directory.
func postgresBinDir() (string, error) {
	dirs, err := filepath.Glob("/usr/lib/postgresql/*/bin")
	if err != nil {
		return "", fmt.Errorf("look for PostgreSQL: %w", err)
	}
	var ok []string
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) && isFile(filepath.Join(d, "postgres")) {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", fmt.Errorf("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (install postgresql)")
	}
	// Newest major version first (15 before 9).
	sort.Slice(ok, func(i, j int) bool { return pgMajor(ok[i]) > pgMajor(ok[j]) })
	return ok[0], nil
}

func pgMajor(bin string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64)
	if err != nil {
		return 0
	}
	return v
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// serverUser is the credential PostgreSQL runs under: the postgres user
// when the harness is root, nil (the harness's own user) otherwise.
func serverUser() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("initdb refuses to run as root and there is no postgres user: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("uid of postgres %q: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("gid of postgres %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, uid, gid, nil
}

// newPostgres makes a data directory under root/pg with initdb (trust
// authentication, user postgres). The stack directory root must let the
// server's user through (mode 0711).
func newPostgres(ctx context.Context, root string, port int, onDeath func(string, time.Time, error)) (*postgres, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "pg")
	for _, d := range []string{dir, filepath.Join(dir, "sock")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("PostgreSQL directory: %w", err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, fmt.Errorf("give %s to the server's user: %w", d, err)
		}
	}
	pg := &postgres{bin: bin, dir: dir, port: port, cred: cred, env: childEnv("LC_ALL=C")}
	pg.proc = &proc{name: "postgres", path: filepath.Join(bin, "postgres"), env: pg.env, dir: dir, cred: cred,
		logPath: filepath.Join(root, "postgres.log"), onDeath: onDeath}
	// --no-sync: initdb's closing fsync buys nothing for a throwaway
	// cluster; the server itself runs with fsync on.
	if err := runOnce(ctx, pg.proc.logPath, cred, dir, pg.env, filepath.Join(bin, "initdb"),
		"-D", pg.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	return pg, nil
}

func (pg *postgres) data() string { return filepath.Join(pg.dir, "data") }

// url is the connection URL of database db, over TCP on loopback.
func (pg *postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

// start runs the postmaster and waits until it accepts connections.
// max_connections leaves room for 3 nodes x 12 connections, the bench's
// pool and a margin.
func (pg *postgres) start(ctx context.Context) error {
	args := []string{"-D", pg.data(), "-p", strconv.Itoa(pg.port), "-k", filepath.Join(pg.dir, "sock"),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100"}
	if err := pg.proc.start(args, pgReadyLine); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return pg.proc.waitReady(wctx)
}

// stop is pg_ctl stop -m mode (fast: roll back and disconnect; immediate:
// no shutdown checkpoint, as after a crash), then waits for the
// postmaster's exit.
func (pg *postgres) stop(ctx context.Context, mode string) error {
	if !pg.proc.alive() {
		return nil
	}
	pg.proc.expectExit()
	if err := runOnce(ctx, pg.proc.logPath, pg.cred, pg.dir, pg.env, filepath.Join(pg.bin, "pg_ctl"),
		"stop", "-D", pg.data(), "-m", mode, "-w", "-t", "60"); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	return pg.proc.waitExit(ctx)
}

// createDB creates database name.
func (pg *postgres) createDB(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, pg.url("postgres"))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL on %d: %w", pg.port, err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if cerr := conn.Close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
