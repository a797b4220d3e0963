// Package testdb gives tests a PostgreSQL database of their own: created
// with a random name on the local server, migrated, dropped when the test
// ends.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate/persist/pgstore"
)

// AdminURL is the server tests create their databases on; BIDGATE_TEST_POSTGRES_URL
// overrides it.
func AdminURL() string {
	if u := os.Getenv("BIDGATE_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// MaxTestConns bounds a test's pool (benchmarks get what they ask): with
// two packages tested at once, the whole suite stays under 40 connections,
// so it passes while other clients hold most of a server's 100.
const MaxTestConns = 12

// New creates and migrates a fresh database and returns its URL and a pool of
// maxConns connections on it (at most MaxTestConns in a test). Both go away
// when tb ends.
func New(tb testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	tb.Helper()
	if _, bench := tb.(*testing.B); !bench {
		maxConns = min(maxConns, MaxTestConns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Fatalf("connect to the test PostgreSQL server (%s): %v", AdminURL(), err)
	}
	defer closeAdmin(tb, ctx, admin)

	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		tb.Fatal(err)
	}
	name := "bidgate_test_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() { drop(tb, name) })

	u, err := url.Parse(AdminURL())
	if err != nil {
		tb.Fatalf("parse %s: %v", AdminURL(), err)
	}
	u.Path = "/" + name
	dbURL := u.String()

	db, err := pgstore.Open(ctx, pgstore.Config{URL: dbURL, MaxConns: int(maxConns)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	if _, err := pgstore.Migrate(ctx, db); err != nil {
		tb.Fatalf("migrate test database: %v", err)
	}
	offsetIDs(tb, ctx, db)
	return db, dbURL
}

// offsetIDs starts auction ids at a random point, so that tests running at
// once against one Redis never share an auction's keys.
func offsetIDs(tb testing.TB, ctx context.Context, db pgstore.Querier) {
	tb.Helper()
	var offset [4]byte
	if _, err := rand.Read(offset[:]); err != nil {
		tb.Fatal(err)
	}
	start := int64(binary.BigEndian.Uint32(offset[:]))<<8 + 1
	if _, err := db.Exec(ctx, `SELECT setval('auction_id_seq', $1, false)`, start); err != nil {
		tb.Fatalf("offset auction ids: %v", err)
	}
}

func closeAdmin(tb testing.TB, ctx context.Context, admin *pgx.Conn) {
	tb.Helper()
	if err := admin.Close(ctx); err != nil {
		tb.Errorf("close the admin connection: %v", err)
	}
}

func drop(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Errorf("drop test database %s: %v", name, err)
		return
	}
	defer closeAdmin(tb, ctx, admin)
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
		tb.Errorf("drop test database %s: %v", name, err)
	}
}

// WaitForEnd blocks until the database clock, the one that decides, has
// passed the auction's end time.
func WaitForEnd(tb testing.TB, db *pgxpool.Pool, auction int64) {
	tb.Helper()
	if _, err := db.Exec(context.Background(),
		`SELECT pg_sleep_until(end_time + INTERVAL '1 millisecond') FROM auction WHERE id = $1`, auction); err != nil {
		tb.Fatal(err)
	}
}
