package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// stmtStat is one statement's line of pg_stat_statements.
type stmtStat struct {
	label    string // the statement's first comment line, or its start
	toplevel bool   // false: run inside a function or a trigger
	calls    int64
	execMS   float64 // total execution time, ms
	rows     int64
	hit      int64 // shared buffers found in the cache
	read     int64 // shared buffers read from the kernel
	dirtied  int64 // shared buffers dirtied
	walBytes float64
}

// statsConn connects to the bench server's postgres database, where the
// pg_stat_statements extension is created: its view shows every database's
// statements, and the bench's databases keep their schema as migrated.
func (e *env) statsConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, e.pg.URL("postgres"))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("pg_stat_statements (shared_preload_libraries): %w", err)
	}
	return conn, nil
}

// resetStatements forgets what pg_stat_statements has counted so far.
func resetStatements(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

// readStatements reads what pg_stat_statements counted for database db since
// its last reset, the costliest first.
func readStatements(ctx context.Context, conn *pgx.Conn, db string) ([]stmtStat, error) {
	rows, err := conn.Query(ctx, `
		SELECT query, toplevel, calls, total_exec_time, rows, shared_blks_hit, shared_blks_read,
		       shared_blks_dirtied, wal_bytes::float8
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		ORDER BY total_exec_time DESC`, db)
	if err != nil {
		return nil, err
	}
	var out []stmtStat
	var s stmtStat
	var text string
	_, err = pgx.ForEachRow(rows, []any{&text, &s.toplevel, &s.calls, &s.execMS, &s.rows, &s.hit, &s.read, &s.dirtied, &s.walBytes}, func() error {
		s.label = statementLabel(text)
		out = append(out, s)
		return nil
	})
	return out, err
}

// statementLabel names a statement in a table row: the first line of the
// comment it starts with (every statement of internal/query has one), else
// its text with blanks collapsed; at most 72 characters, without the pipe
// that would break a Markdown table.
func statementLabel(text string) string {
	text = strings.TrimSpace(text)
	label := strings.Join(strings.Fields(text), " ")
	if first, _, _ := strings.Cut(text, "\n"); strings.HasPrefix(first, "--") {
		label = strings.TrimSpace(strings.TrimPrefix(first, "--"))
	}
	label = strings.ReplaceAll(label, "|", "/")
	if r := []rune(label); len(r) > 72 {
		label = string(r[:71]) + "…"
	}
	return label
}
