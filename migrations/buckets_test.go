package migrations_test

import (
	"context"
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

// TestEnqueueBucketSingleNode: on one PostgreSQL enqueue accepts a bucket and
// ignores it, so producer code is the same in both modes: any value or none
// inserts, and the same event with another bucket is still a duplicate.
func TestEnqueueBucketSingleNode(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	if mode, err := migrations.Mode(ctx, pool); err != nil || mode != nil {
		t.Fatalf("Mode = %+v, %v; want single-node (nil)", mode, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('c', 'webhook')`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		event  string
		bucket any
		fresh  bool
	}{
		{"e1", 5, true},
		{"e1", 9, false}, // another bucket: still the same event
		{"e2", nil, true},
		{"e3", -3, true},
	} {
		var fresh bool
		if err := pool.QueryRow(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{}', bucket => $2)`,
			tc.event, tc.bucket).Scan(&fresh); err != nil || fresh != tc.fresh {
			t.Errorf("enqueue(%s, bucket %v) = %v, %v; want %v", tc.event, tc.bucket, fresh, err, tc.fresh)
		}
	}
}

// TestBucketMigrationKeepsProducerRights: migration 014 replaces enqueue (it
// gains an argument), and a producer role granted before keeps calling it,
// with the owner's rights, before SetProducers runs again.
func TestBucketMigrationKeepsProducerRights(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `DROP SCHEMA effectd CASCADE`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.UpTo(ctx, pool, 13); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('c', 'webhook')`); err != nil {
		t.Fatal(err)
	}
	app := newRole(t, pool, "bucket_app", "LOGIN")
	if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: app, Channels: []string{"c"}}}); err != nil {
		t.Fatal(err)
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	conn := connectAs(t, pool, app)
	var fresh bool
	if err := conn.QueryRow(ctx, `SELECT effectd.enqueue(event_id => 'x', channel => 'c', payload => '{}', bucket => 1)`).Scan(&fresh); err != nil || !fresh {
		t.Fatalf("the producer's enqueue after migration 014 = %v, %v", fresh, err)
	}
	var secdef bool
	var config []string
	if err := pool.QueryRow(ctx, `SELECT prosecdef, coalesce(proconfig, '{}') FROM pg_proc WHERE oid = 'effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text, bigint)'::regprocedure`).
		Scan(&secdef, &config); err != nil || !secdef || len(config) != 1 || config[0] != "search_path=effectd, pg_temp" {
		t.Fatalf("enqueue after 014: SECURITY DEFINER %v, config %q, %v", secdef, config, err)
	}
}
