package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestUpConcurrent runs the migrations from several instances at once, twice.
func TestUpConcurrent(t *testing.T) {
	pool := pgtest.New(t) // already migrated: Up must be a no-op on it
	ctx := context.Background()
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatalf("second Up: %v", err)
	}

	// A database with nothing in it, migrated by four instances at once.
	if _, err := pool.Exec(ctx, `DROP SCHEMA effectd CASCADE`); err != nil {
		t.Fatal(err)
	}
	current, err := migrations.Current(ctx, pool)
	if err != nil || current {
		t.Fatalf("Current on empty database = %v, %v; want false", current, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := pgxpool.New(ctx, pool.Config().ConnString())
			if err != nil {
				errs[i] = err
				return
			}
			defer p.Close()
			errs[i] = migrations.New(p).Up(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	current, err = migrations.Current(ctx, pool)
	if err != nil || !current {
		t.Fatalf("Current after Up = %v, %v; want true", current, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.wakeup`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("wakeup rows = %d, %v; want 1 (a migration ran twice?)", n, err)
	}
}

// TestCurrentSeesEachMissingMigration: a database missing any one embedded
// migration, the newest or one in the middle, is behind.
func TestCurrentSeesEachMissingMigration(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	var versions []int64
	if err := pool.QueryRow(ctx, `SELECT array_agg(version_id ORDER BY version_id) FROM effectd.goose_db_version WHERE version_id > 0`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if len(versions) < 2 {
		t.Fatalf("applied versions = %v; want every embedded migration", versions)
	}
	for _, v := range []int64{versions[len(versions)-1], versions[1]} {
		if _, err := pool.Exec(ctx, `DELETE FROM effectd.goose_db_version WHERE version_id = $1`, v); err != nil {
			t.Fatal(err)
		}
		if current, err := migrations.Current(ctx, pool); err != nil || current {
			t.Errorf("Current without version %d = %v, %v; want false", v, current, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO effectd.goose_db_version (version_id, is_applied) VALUES ($1, true)`, v); err != nil {
			t.Fatal(err)
		}
	}
	if current, err := migrations.Current(ctx, pool); err != nil || !current {
		t.Fatalf("Current with every version = %v, %v; want true", current, err)
	}
}
