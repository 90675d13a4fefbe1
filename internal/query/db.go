package query

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB runs statements: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxDB is a DB that begins transactions: a *pgxpool.Pool, a *pgx.Conn, or a
// pgx.Tx (whose Begin is a savepoint).
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// RowQuerier runs a statement that returns one row: a pgx.Tx, a *pgxpool.Pool
// or a producer's own transaction adapted to it.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
