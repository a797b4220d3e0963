package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key that serializes concurrent migrators
// (several nodes starting at once).
const migrationLock = 0x6269646761746531 // "bidgate1"

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INT         PRIMARY KEY,
	name       TEXT        NOT NULL,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a version number and '_'", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// Migrate applies every migration the database has not seen yet, each in its
// own transaction. It is idempotent and safe to run from many nodes at once.
// It returns the versions it applied.
func Migrate(ctx context.Context, db *pgxpool.Pool) ([]int, error) {
	return migrateTo(ctx, db, math.MaxInt)
}

// migrateTo is Migrate up to version last.
func migrateTo(ctx context.Context, db *pgxpool.Pool, last int) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range ms {
		if m.version > last {
			break
		}
		done, err := apply(ctx, db, m)
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if done {
			applied = append(applied, m.version)
		}
	}
	return applied, nil
}

func apply(ctx context.Context, db *pgxpool.Pool, m migration) (applied bool, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// Under the lock, so that concurrent migrators never race on creating
		// the bookkeeping table either.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, createMigrationsTable); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return err
		}
		applied = true
		return nil
	})
	return applied, err
}
