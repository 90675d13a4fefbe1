package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/effectd/effectd/policy"
)

// FS holds the schema migrations, 00N_name.up.sql, in the order they apply.
//
//go:embed *.up.sql
var FS embed.FS

// versionTable records applied migrations inside effectd's own schema, so it
// never collides with a goose table of the producer's application.
const versionTable = "effectd.goose_db_version"

// lockKey serialises effectd's migrations among instances running them at once.
const lockKey = 0x65666664 // "effd"

// Migrator changes the schema of the database behind its pool: it applies
// the migrations (Up), the distributed mode's layout (Distribute) and the
// producers' rights (SetProducers), each under the migrations' advisory lock.
type Migrator struct {
	pool *pgxpool.Pool
}

// New returns a Migrator of the database behind pool.
func New(pool *pgxpool.Pool) *Migrator { return &Migrator{pool: pool} }

// Up applies every pending migration. It is idempotent and safe to run from
// several instances at once: the whole run holds a session advisory lock,
// which later instances wait on (without polling) and then find nothing left
// to do.
func (m *Migrator) Up(ctx context.Context) (err error) {
	db := stdlib.OpenDBFromPool(m.pool)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations.Up: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return fmt.Errorf("migrations.Up: lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey)
	if _, err := conn.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS effectd`); err != nil {
		return fmt.Errorf("migrations.Up: create schema: %w", err)
	}
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations.Up: %w", err)
	}
	if err := writeDefaults(ctx, conn); err != nil {
		return fmt.Errorf("migrations.Up: policy defaults: %w", err)
	}
	return nil
}

// writeDefaults copies into effectd.policy_defaults the policy defaults that
// SQL reads, from package policy, so that SQL spells none of its own.
func writeDefaults(ctx context.Context, conn *sql.Conn) error {
	retention := fmt.Sprintf("%d microseconds", policy.DefaultRetention.D().Microseconds())
	_, err := conn.ExecContext(ctx, `
INSERT INTO effectd.policy_defaults AS d (retention) VALUES ($1::interval)
ON CONFLICT (id) DO UPDATE SET retention = excluded.retention
WHERE d.retention IS DISTINCT FROM excluded.retention`, retention)
	return err
}

// Current reports whether every embedded migration has been applied to db (a
// pool, a connection or a transaction). It reads the version table in one
// round trip (serve calls it before its first claim, and /metrics on every
// scrape).
func Current(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	want, err := embeddedVersions()
	if err != nil {
		return false, err
	}
	var applied []int64
	err = db.QueryRow(ctx, `SELECT coalesce(array_agg(version_id), '{}') FROM `+versionTable+` WHERE is_applied`,
		pgx.QueryExecModeSimpleProtocol).Scan(&applied)
	var pgErr *pgconn.PgError // undefined table or schema: never migrated
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrations.Current: %w", err)
	}
	have := make(map[int64]bool, len(applied))
	for _, v := range applied {
		have[v] = true
	}
	for _, v := range want {
		if !have[v] {
			return false, nil
		}
	}
	return true, nil
}

// embeddedVersions lists the versions of the embedded migrations, from their
// file names (00N_name.up.sql), as goose numbers them.
func embeddedVersions() ([]int64, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	out := make([]int64, 0, len(names))
	for _, name := range names {
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: the name does not start with a version number", name)
		}
		out = append(out, v)
	}
	return out, nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}
