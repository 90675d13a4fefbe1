package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Citus is the distributed mode as database.citus configures it: effectd's
// large tables are distributed by a column bucket co-located with the
// producer's table Schema.Table, whose distribution column Column holds the
// values 0..Buckets-1.
type Citus struct {
	Schema, Table string
	Column        string
	Buckets       int
}

// Qualified is the producer's table as schema.table.
func (c Citus) Qualified() string { return c.Schema + "." + c.Table }

// Mode reads the distributed mode from the database: the row of effectd.citus
// that Distribute writes, or nil in single-node mode.
func Mode(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*Citus, error) {
	var c Citus
	var qualified string
	err := q.QueryRow(ctx, `SELECT colocate_with, bucket_column, buckets FROM effectd.citus WHERE id = 1`).
		Scan(&qualified, &c.Column, &c.Buckets)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrations.Mode: %w", err)
	}
	for i := range qualified {
		if qualified[i] == '.' {
			c.Schema, c.Table = qualified[:i], qualified[i+1:]
			break
		}
	}
	return &c, nil
}

var _ = pgxpool.Pool{}
