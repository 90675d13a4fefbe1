package migrations

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Citus is the distributed mode as database.citus configures it: effectd's
// large tables are distributed by a column bucket co-located with the
// producer's table Schema.Table, whose distribution column Column holds the
// values 0..Buckets-1. Each partition of those tables made from then on
// covers PartitionDays UTC days (DefaultPartitionDays when 0).
type Citus struct {
	Schema, Table string
	Column        string
	Buckets       int
	PartitionDays int
}

// DefaultPartitionDays is how many days one partition covers in the
// distributed mode unless database.citus.partition_days says otherwise: a
// read without a bucket plans every partition on every shard, and a week
// keeps a 15-day retention in 3 or 4 of them (migration 016).
const DefaultPartitionDays = 7

// MaxPartitionDays bounds PartitionDays (effectd.citus.partition_days).
const MaxPartitionDays = 31

// Days is how many days one partition covers: PartitionDays, or
// DefaultPartitionDays when it is 0.
func (c Citus) Days() int {
	if c.PartitionDays == 0 {
		return DefaultPartitionDays
	}
	return c.PartitionDays
}

// Qualified is the producer's table as schema.table.
func (c Citus) Qualified() string { return c.Schema + "." + c.Table }

//go:embed citus/distribute.sql
var distributeSQL string

//go:embed citus/lookups.sql
var lookupsSQL string

// Distribute applies the distributed mode's layout (citus/distribute.sql,
// then the lookups of citus/lookups.sql) on a Citus coordinator whose schema
// Up has made current, in one transaction under the migrations' lock, and
// returns what it changed: nothing on a second run. An error names the
// database.citus field it is about.
func (m *Migrator) Distribute(ctx context.Context, c Citus) (done []string, err error) {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations.Distribute: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return nil, fmt.Errorf("migrations.Distribute: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var citus bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
			return err
		}
		if !citus {
			return errors.New("database.citus: this database has no citus extension; run CREATE EXTENSION citus on the coordinator and on every worker, or remove database.citus")
		}
		// DDL on tables distributed in this same transaction must use one
		// connection per worker.
		if _, err := tx.Exec(ctx, `SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, distributeSQL); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT effectd.distribute($1, $2, $3, $4)`, c.Qualified(), c.Column, c.Buckets, c.Days()).Scan(&done); err != nil {
			return err
		}
		// the lookups a read without a bucket needs (citus/lookups.sql)
		var lookups []string
		if _, err := tx.Exec(ctx, lookupsSQL); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT effectd.distribute_lookups()`).Scan(&lookups); err != nil {
			return err
		}
		done = append(done, lookups...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrations.Distribute: %w", err)
	}
	return done, nil
}

// Mode reads the distributed mode from the database: the row of effectd.citus
// that Distribute writes, or nil in single-node mode.
func Mode(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*Citus, error) {
	var c Citus
	var qualified string
	err := db.QueryRow(ctx, `SELECT colocate_with, bucket_column, buckets, partition_days FROM effectd.citus WHERE id = 1`).
		Scan(&qualified, &c.Column, &c.Buckets, &c.PartitionDays)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrations.Mode: %w", err)
	}
	c.Schema, c.Table, _ = strings.Cut(qualified, ".")
	return &c, nil
}
