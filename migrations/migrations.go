package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the schema migrations, 00N_name.up.sql, in the order they apply.
//
//go:embed *.sql
var FS embed.FS

// versionTable records applied migrations inside effectd's own schema, so it
// never collides with a goose table of the producer's application.
const versionTable = "effectd.goose_db_version"

// schemaLockKey serialises creating the schema among instances migrating at once.
const schemaLockKey = 0x65666664 // "effd"

// Up applies every pending migration to the database behind pool. It is
// idempotent and safe to run from several instances at once: goose holds a
// session advisory lock for the whole run.
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := createSchema(ctx, db); err != nil {
		return err
	}
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations.Up: %w", err)
	}
	return nil
}

// Current reports whether every embedded migration has been applied.
func Current(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionTable).Scan(&exists); err != nil {
		return false, fmt.Errorf("migrations.Current: %w", err)
	}
	if !exists {
		return false, nil
	}
	p, err := provider(db)
	if err != nil {
		return false, err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("migrations.Current: %w", err)
	}
	return !pending, nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// createSchema makes the effectd schema that holds goose's own table.
// CREATE SCHEMA IF NOT EXISTS can still race, so it runs under a transaction lock.
func createSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrations: create schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return fmt.Errorf("migrations: create schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS effectd`); err != nil {
		return fmt.Errorf("migrations: create schema: %w", err)
	}
	return tx.Commit()
}
