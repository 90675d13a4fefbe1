package localpg_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/internal/localpg"
)

// pair starts a primary and a streaming standby of it named "standby"; both
// are stopped and removed when the test ends.
func pair(t *testing.T, primary localpg.Options) (p, s *localpg.Server) {
	t.Helper()
	dir, err := os.MkdirTemp("", "effectd-localpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach it when run as root
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err = localpg.Start(ctx, dir+"/primary", primary)
	if errors.Is(err, localpg.ErrNoPostgres) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.StopImmediate() })
	s, err = p.StartStandby(ctx, dir+"/standby", "standby", localpg.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return p, s
}

func connect(t *testing.T, s *localpg.Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestSynchronousStandbyPromote: with SyncStandby, a commit on the primary is
// visible on the standby as soon as it returns; the standby refuses writes
// until the primary is killed and it is promoted, then accepts them.
func TestSynchronousStandbyPromote(t *testing.T) {
	ctx := context.Background()
	p, s := pair(t, localpg.Options{Fast: true, SyncStandby: "standby"})
	pc, sc := connect(t, p), connect(t, s)
	// The standby is named sync once it has caught up with the primary.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var mode string
		err := pc.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&mode)
		if err == nil && mode == "sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pg_stat_replication: standby is %q (%v), want sync", mode, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the server's view, with a deadline
	}
	if _, err := pc.Exec(ctx, `CREATE TABLE t (n int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sc.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("standby right after the commit: %d rows (%v), want 1 (remote_apply)", n, err)
	}
	_, err := sc.Exec(ctx, `INSERT INTO t VALUES (2)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" { // read_only_sql_transaction
		t.Fatalf("write on the standby: %v, want read_only_sql_transaction", err)
	}
	if err := p.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatalf("write on the promoted standby: %v", err)
	}
}
