//go:build citus

package harnessdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/pgtest"
)

func init() { pgtest.AtExit(citustest.Stop) }

// TestCitusRecoverPrepared: a transaction a worker holds PREPARED, whose
// coordinator recorded the commit (what a worker that fails between Citus's
// PREPARE and COMMIT PREPARED leaves behind), hides its row until
// RecoverPrepared commits it; RecoverPrepared counts it while it is pending
// and reports none left after.
func TestCitusRecoverPrepared(t *testing.T) {
	ctx := context.Background()
	c := citustest.Cluster(t)
	pool := citustest.New(t)
	name := pool.Config().ConnConfig.Database
	w := c.Workers[0]
	wc, err := pgx.Connect(ctx, w.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close(ctx)
	count := func() int {
		var n int
		if err := wc.QueryRow(ctx, `SELECT count(*) FROM held`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var group int
	if err := pool.QueryRow(ctx, `SELECT groupid FROM pg_dist_node WHERE nodeport = $1`, w.Port).Scan(&group); err != nil {
		t.Fatal(err)
	}
	// the name Citus gives a coordinator's (group 0) prepared transactions:
	// citus_<group>_<pid>_<transaction>_<connection>
	gid := fmt.Sprintf("citus_0_%d_1_0", 4_000_000)
	for _, q := range []string{
		`CREATE TABLE held (n int)`,
		`BEGIN`, `INSERT INTO held VALUES (1)`, `PREPARE TRANSACTION '` + gid + `'`,
	} {
		if _, err := wc.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO pg_dist_transaction (groupid, gid) VALUES ($1, $2)`, group, gid); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("a prepared row visible before the commit: %d", n)
	}
	recovered, left, err := RecoverPrepared(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if recovered != 1 || left != 0 {
		t.Errorf("RecoverPrepared: recovered %d, left %d; want 1 and 0", recovered, left)
	}
	if n := count(); n != 1 {
		t.Errorf("the recorded commit's row: %d visible after the recovery, want 1", n)
	}
	if recovered, left, err = RecoverPrepared(ctx, pool); err != nil || recovered != 0 || left != 0 {
		t.Errorf("a second RecoverPrepared: recovered %d, left %d, err %v; want 0, 0", recovered, left, err)
	}
}
