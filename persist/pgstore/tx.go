package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// FinishTimeout bounds how long InTx's commit or rollback outlives its
// context.
const FinishTimeout = 5 * time.Second

// InTx is pgx.BeginFunc for background workers (closer, relays,
// persisters, reconciler): once fn has run, the commit or rollback is not
// cut short by ctx, only by FinishTimeout. A commit abandoned half-way at
// shutdown may still be made by the server while the caller sees an error,
// and then neither counts, announces nor records what it wrote.
func InTx(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	err = fn(tx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FinishTimeout)
	defer cancel()
	if err != nil {
		// A failed rollback closes the connection, which rolls back too.
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}
