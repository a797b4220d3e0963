// Package pgtest gives tests a PostgreSQL database of their own: created with a
// random name on the local server, migrated, and dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate/persist"
)

// AdminURL is the server tests create their databases on; BIDGATE_TEST_POSTGRES_URL
// overrides it.
func AdminURL() string {
	if u := os.Getenv("BIDGATE_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// New creates and migrates a fresh database and returns its URL and a pool of
// maxConns connections on it. Both go away when tb ends.
func New(tb testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Fatalf("connect to the test PostgreSQL server (%s): %v", AdminURL(), err)
	}
	defer admin.Close(ctx)

	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
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

	db, err := persist.Open(ctx, dbURL, maxConns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	if _, err := persist.Migrate(ctx, db); err != nil {
		tb.Fatalf("migrate test database: %v", err)
	}
	return db, dbURL
}

func drop(tb testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Errorf("drop test database %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
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
