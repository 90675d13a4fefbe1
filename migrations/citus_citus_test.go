//go:build citus

package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/migrations"
)

// pgtest.Main stops the Citus cluster the tests of this binary started, if any.
func init() { pgtest.AtExit(citustest.Stop) }

// citusDB returns a pool on a fresh database of the Citus cluster with the
// producer's table producer.orders distributed by bucket (int), migrated
// and distributed with 8 buckets, one channel "c" registered.
func citusDB(t *testing.T) (*pgxpool.Pool, migrations.Citus) {
	t.Helper()
	pool := citustest.New(t)
	ctx := context.Background()
	citustest.ProducerOrders(t, pool)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	c := migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 8, PartitionDays: migrations.DefaultPartitionDays}
	done, err := migrations.New(pool).Distribute(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) == 0 {
		t.Fatal("Distribute did nothing on a fresh database")
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('c', 'webhook')`); err != nil {
		t.Fatal(err)
	}
	return pool, c
}

// TestCitusDistribute: the distribution step makes intents, attempts and the
// settled counts distributed tables co-located with the producer's, channels a reference
// table, every unique key of a partition starts with bucket, no trigger is
// left on intents, and the mode is recorded; a second run changes nothing.
func TestCitusDistribute(t *testing.T) {
	pool, c := citusDB(t)
	ctx := context.Background()
	var colocated bool
	if err := pool.QueryRow(ctx, `
SELECT count(DISTINCT colocationid) = 1 AND count(*) = 5
FROM pg_dist_partition
WHERE logicalrelid IN ('producer.orders'::regclass, 'effectd.intents'::regclass, 'effectd.attempts'::regclass,
                       'effectd.intent_counts'::regclass, 'effectd.intent_count_deltas'::regclass)
  AND partmethod = 'h'`).Scan(&colocated); err != nil || !colocated {
		t.Fatalf("intents, attempts and the settled counts co-located with producer.orders: %v, %v", colocated, err)
	}
	var ref string
	if err := pool.QueryRow(ctx, `SELECT partmethod::text FROM pg_dist_partition WHERE logicalrelid = 'effectd.channels'::regclass`).Scan(&ref); err != nil || ref != "n" {
		t.Fatalf("channels: partmethod %q, %v; want a reference table", ref, err)
	}
	var keysWithout []string
	rows, _ := pool.Query(ctx, `
SELECT c.conrelid::regclass || ' ' || pg_get_constraintdef(c.oid)
FROM pg_constraint c JOIN pg_inherits i ON i.inhrelid = c.conrelid
WHERE i.inhparent IN ('effectd.intents'::regclass, 'effectd.attempts'::regclass) AND c.contype IN ('p', 'u')
  AND pg_get_constraintdef(c.oid) NOT LIKE '%(bucket, %'`)
	keysWithout, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(keysWithout) > 0 {
		t.Fatalf("unique keys without bucket: %v, %v", keysWithout, err)
	}
	var triggers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'effectd.intents'::regclass AND NOT tgisinternal`).Scan(&triggers); err != nil || triggers != 0 {
		t.Fatalf("triggers left on intents: %d, %v", triggers, err)
	}
	mode, err := migrations.Mode(ctx, pool)
	if err != nil || mode == nil || *mode != c {
		t.Fatalf("Mode = %+v, %v; want %+v", mode, err, c)
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatalf("Up after Distribute: %v", err)
	}
	done, err := migrations.New(pool).Distribute(ctx, c)
	if err != nil || len(done) != 0 {
		t.Fatalf("second Distribute: %v, %v; want nothing done", done, err)
	}
}

// TestCitusDistributeRefuses: a producer table that is not distributed, or
// distributed by another column, and a non-integer column, are refused with
// a message naming the field of database.citus.
func TestCitusDistributeRefuses(t *testing.T) {
	pool := citustest.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE SCHEMA producer`,
		`CREATE TABLE producer.local (bucket int NOT NULL)`,
		`CREATE TABLE producer.by_id (bucket int NOT NULL, id bigint NOT NULL)`,
		`SELECT create_distributed_table('producer.by_id', 'id')`,
		`CREATE TABLE producer.by_text (bucket text NOT NULL)`,
		`SELECT create_distributed_table('producer.by_text', 'bucket')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table, column, want string
	}{
		{"nothere", "bucket", "database.citus.colocate_with: no table producer.nothere"},
		{"local", "bucket", "database.citus.colocate_with: producer.local is not a hash-distributed table"},
		{"by_id", "bucket", "database.citus.bucket_column: producer.by_id is distributed by id, not by bucket"},
		{"by_text", "bucket", "database.citus.bucket_column: producer.by_text.bucket is text, want smallint, integer or bigint"},
	} {
		_, err := migrations.New(pool).Distribute(ctx, migrations.Citus{Schema: "producer", Table: tc.table, Column: tc.column, Buckets: 4})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want %q", tc.table, err, tc.want)
		}
	}
	if mode, err := migrations.Mode(ctx, pool); err != nil || mode != nil {
		t.Errorf("after refusals Mode = %+v, %v; want single-node", mode, err)
	}
}

// sqlstate returns err's SQLSTATE and message, or "" when err is nil.
func sqlstate(err error) (code, msg string) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code, pgErr.Message
	}
	if err != nil {
		return "?", err.Error()
	}
	return "", ""
}

// TestCitusEnqueue: an intent enqueued with a bucket commits and rolls back
// with the producer's row of that bucket; the same event again in its bucket
// inserts nothing; a missing or out-of-range bucket is refused naming
// bucket (22023); the other refusals keep their SQLSTATEs.
func TestCitusEnqueue(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	enqueue := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, event, channel string, bucket any) (bool, error) {
		var fresh bool
		err := q.QueryRow(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{"a": 1}', bucket => $3)`, event, channel, bucket).Scan(&fresh)
		return fresh, err
	}
	for _, commit := range []bool{true, false} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := map[bool]int{true: 1, false: 2}[commit]
		if _, err := tx.Exec(ctx, `INSERT INTO producer.orders (bucket, id) VALUES (5, $1)`, id); err != nil {
			t.Fatal(err)
		}
		if fresh, err := enqueue(tx, "order-"+map[bool]string{true: "1", false: "2"}[commit], "c", 5); err != nil || !fresh {
			t.Fatalf("enqueue in the producer's transaction: %v, %v", fresh, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var orders, intents int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM producer.orders), (SELECT count(*) FROM effectd.intents WHERE bucket = 5)`).Scan(&orders, &intents); err != nil || orders != 1 || intents != 1 {
		t.Fatalf("after a commit and a rollback: %d orders, %d intents (%v); want 1 and 1", orders, intents, err)
	}
	if fresh, err := enqueue(pool, "order-1", "c", 5); err != nil || fresh {
		t.Fatalf("redelivery in the same bucket = %v, %v; want false", fresh, err)
	}
	for _, tc := range []struct {
		event, channel string
		bucket         any
		code, field    string
	}{
		{"x", "c", nil, "22023", "bucket: is required"},
		{"x", "c", 8, "22023", "bucket: must be 0 to 7, got 8"},
		{"x", "c", -1, "22023", "bucket: must be 0 to 7, got -1"},
		{"x", "nope", 1, "22023", "channel: unknown channel"},
		{"", "c", 1, "22023", "event_id: must not be empty"},
	} {
		_, err := enqueue(pool, tc.event, tc.channel, tc.bucket)
		code, msg := sqlstate(err)
		if code != tc.code || !strings.Contains(msg, tc.field) {
			t.Errorf("enqueue(%q, %q, bucket %v): %s %s; want %s naming %q", tc.event, tc.channel, tc.bucket, code, msg, tc.code, tc.field)
		}
	}
}

// TestCitusPartitions: a day partition made after distribution is
// distributed with its parent and keyed by bucket first, and the pruner's
// drop (a plain DETACH: Citus refuses CONCURRENTLY) removes it from every
// shard.
func TestCitusPartitions(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	var made bool
	if err := pool.QueryRow(ctx, `SELECT effectd.add_partition('intents', (now() AT TIME ZONE 'UTC')::date + 20)`).Scan(&made); err != nil || !made {
		t.Fatalf("add_partition: %v, %v", made, err)
	}
	var name string
	var distributed bool
	if err := pool.QueryRow(ctx, `
SELECT p.name, EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = ('effectd.' || p.name)::regclass)
FROM effectd.partitions p WHERE p.parent = 'intents' ORDER BY p.lower DESC LIMIT 1`).Scan(&name, &distributed); err != nil || !distributed {
		t.Fatalf("partition %s distributed: %v, %v", name, distributed, err)
	}
	var keys string
	if err := pool.QueryRow(ctx, `SELECT string_agg(pg_get_constraintdef(oid), '; ' ORDER BY conname) FROM pg_constraint WHERE conrelid = ('effectd.' || $1)::regclass AND contype IN ('p', 'u')`, name).Scan(&keys); err != nil ||
		keys != "UNIQUE (bucket, event_id, channel); PRIMARY KEY (bucket, id)" {
		t.Fatalf("keys of %s: %q, %v", name, keys, err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE effectd.intents DETACH PARTITION effectd.`+name+` CONCURRENTLY`); err == nil {
		t.Log("Citus now detaches CONCURRENTLY: DropPartition could again")
	}
	var part retentiondb.Partition
	if err := pool.QueryRow(ctx, `SELECT name, parent, lower, upper FROM effectd.partitions WHERE name = $1`, name).
		Scan(&part.Name, &part.Parent, &part.Lower, &part.Upper); err != nil {
		t.Fatal(err)
	}
	session, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release()
	if err := retentiondb.DropPartition(ctx, session.Conn(), part, 0); err != nil {
		t.Fatalf("DropPartition %s: %v", name, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid::text = 'effectd.' || $1`, name).Scan(&left); err != nil || left != 0 {
		t.Fatalf("shards of %s left: %d, %v", name, left, err)
	}
}

// TestCitusPartitionsSpanWeeks: in the distributed mode a partition made
// after migrate covers a week, Monday to Monday (DefaultPartitionDays), and
// so do the empty day partitions migrate made ahead, made again by
// Distribute; the first one is cut where migrate's first partition (all
// before tomorrow) ends: the partitions of each table are contiguous, never
// overlap, and the three tables have the same bounds. Changing
// partition_days changes the partitions made after.
func TestCitusPartitionsSpanWeeks(t *testing.T) {
	pool, c := citusDB(t)
	ctx := context.Background()
	type span struct {
		name         string
		lower, upper time.Time
	}
	spans := func(parent string) (out []span) {
		t.Helper()
		rows, _ := pool.Query(ctx, `SELECT name, lower, upper FROM effectd.partitions WHERE parent = $1 AND lower > '-infinity' ORDER BY lower`, parent)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s span, err error) {
			err = r.Scan(&s.name, &s.lower, &s.upper)
			return s, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const day = 24 * time.Hour
	var first time.Time // where the partition migrate made first (all before tomorrow) ends
	if err := pool.QueryRow(ctx, `SELECT upper FROM effectd.partitions WHERE parent = 'intents' AND lower = '-infinity'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT effectd.add_partitions(24)`); err != nil {
		t.Fatal(err)
	}
	// migrate's 3 day partitions ahead were made again as weeks by Distribute
	intents := spans("intents")
	weeks := intents
	if len(weeks) < 3 || len(weeks) > 5 {
		t.Fatalf("24 days ahead took %d partitions: %+v; want 3 to 5 weeks", len(weeks), weeks)
	}
	for i, w := range weeks {
		monday := w.upper.Weekday() == time.Monday && w.upper.Equal(w.upper.Truncate(day))
		switch {
		case !monday:
			t.Errorf("%s ends %s, not on a Monday at midnight UTC", w.name, w.upper)
		case i == 0 && !w.lower.Equal(first):
			t.Errorf("the first week %s begins %s, not where the first partition ends (%s)", w.name, w.lower, first)
		case i > 0 && w.upper.Sub(w.lower) != 7*day:
			t.Errorf("%s covers %s to %s, not a week", w.name, w.lower, w.upper)
		}
	}
	for i := 1; i < len(intents); i++ {
		if !intents[i].lower.Equal(intents[i-1].upper) {
			t.Errorf("%s begins %s, %s ended %s: not contiguous", intents[i].name, intents[i].lower, intents[i-1].name, intents[i-1].upper)
		}
	}
	if last := intents[len(intents)-1].upper; last.Before(time.Now().Add(24 * day)) {
		t.Errorf("partitions end %s, before 24 days from now", last)
	}
	for _, parent := range []string{"attempts", "provider_events"} {
		other := spans(parent)
		if len(other) != len(intents) {
			t.Fatalf("%s has %d partitions, intents %d", parent, len(other), len(intents))
		}
		for i := range other {
			if !other[i].lower.Equal(intents[i].lower) || !other[i].upper.Equal(intents[i].upper) {
				t.Errorf("%s %s covers %s to %s, intents %s to %s", parent, other[i].name, other[i].lower, other[i].upper, intents[i].lower, intents[i].upper)
			}
		}
	}

	// one day a partition again, from the next partition made on
	c.PartitionDays = 1
	if _, err := migrations.New(pool).Distribute(ctx, c); err != nil {
		t.Fatal(err)
	}
	if mode, err := migrations.Mode(ctx, pool); err != nil || mode.Days() != 1 {
		t.Fatalf("Mode after partition_days 1: %+v, %v", mode, err)
	}
	if _, err := pool.Exec(ctx, `SELECT effectd.add_partitions(40)`); err != nil {
		t.Fatal(err)
	}
	after := spans("intents")
	for _, p := range after[len(intents):] {
		if p.upper.Sub(p.lower) != day {
			t.Errorf("%s covers %s to %s after partition_days 1, not a day", p.name, p.lower, p.upper)
		}
	}
	if len(after) == len(intents) {
		t.Error("add_partitions(40) made nothing")
	}
}

// TestCitusEnqueueDedupe: in the distributed mode a redelivery is a
// duplicate after its intent's row is gone (the key outlives it), and a
// REPEATABLE READ producer whose snapshot on the bucket's shard predates
// another transaction's committed enqueue of the event is refused with
// 40001, never given a second intent.
func TestCitusEnqueueDedupe(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	enqueue := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, event string) (bool, error) {
		var fresh bool
		err := q.QueryRow(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{}', bucket => 3)`, event).Scan(&fresh)
		return fresh, err
	}
	if fresh, err := enqueue(pool, "e1"); err != nil || !fresh {
		t.Fatalf("first enqueue = %v, %v", fresh, err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM effectd.intents WHERE bucket = 3`); err != nil {
		t.Fatal(err)
	}
	if fresh, err := enqueue(pool, "e1"); err != nil || fresh {
		t.Fatalf("redelivery after the intent's row went = %v, %v; want a duplicate", fresh, err)
	}

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM effectd.dedupe_keys WHERE bucket = 3`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if fresh, err := enqueue(pool, "e2"); err != nil || !fresh {
		t.Fatalf("the other transaction's enqueue = %v, %v", fresh, err)
	}
	fresh, err := enqueue(tx, "e2")
	if code, _ := sqlstate(err); code != "40001" {
		t.Fatalf("REPEATABLE READ enqueue of an event committed after its snapshot = %v, %v; want 40001", fresh, err)
	}
	tx.Rollback(ctx)
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE bucket = 3 AND event_id = 'e2'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d intents of e2, %v; want 1", n, err)
	}
}
