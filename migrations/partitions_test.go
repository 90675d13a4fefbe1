package migrations_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/migrations"
)

// TestUpgradeToPartitions: a deployment at migration 012 holding a million
// intents (EFFECTD_UPGRADE_ROWS sets how many; -short takes 20,000) in every
// state, with attempts and provider events, goes to the day-partitioned
// layout: every row is still there and counted, the ids go on after the last,
// an event already enqueued is still a duplicate, and a call in flight during
// the upgrade completes once on its row.
func TestUpgradeToPartitions(t *testing.T) {
	rows := 1_000_000
	if testing.Short() {
		rows = 20_000
	}
	if s := os.Getenv("EFFECTD_UPGRADE_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	pool := at012(t, rows)
	ctx := context.Background()
	type census struct{ intents, sent, failed, doubt, sending, pending, attempts, events, lastID int64 }
	take := func() (c census) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'SENT'), count(*) FILTER (WHERE status = 'FAILED'),
			count(*) FILTER (WHERE status = 'IN_DOUBT'), count(*) FILTER (WHERE status = 'SENDING'), count(*) FILTER (WHERE status = 'PENDING'),
			(SELECT count(*) FROM effectd.attempts), (SELECT count(*) FROM effectd.provider_events), max(id)
			FROM effectd.intents`).Scan(&c.intents, &c.sent, &c.failed, &c.doubt, &c.sending, &c.pending, &c.attempts, &c.events, &c.lastID); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := take()

	start := time.Now()
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("migration 013 on %d intents, %d attempts, %d provider events: %s", before.intents, before.attempts, before.events,
		time.Since(start).Round(time.Millisecond))

	if after := take(); after != before {
		t.Fatalf("after the upgrade %+v, before %+v", after, before)
	}
	var parts int
	pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'effectd.intents'::regclass`).Scan(&parts)
	if parts < 2 {
		t.Fatalf("intents has %d partitions, want the table it was and the days ahead", parts)
	}
	// the kept counts still equal the rows
	if err := readdb.FoldSettledCounts(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var kept int64
	pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM effectd.intent_counts WHERE status IN ('SENT', 'FAILED')`).Scan(&kept)
	if kept != before.sent+before.failed {
		t.Fatalf("kept counts say %d settled, the table holds %d", kept, before.sent+before.failed)
	}
	// an event enqueued before the upgrade is still a duplicate; a new one gets the next id
	var dup, fresh bool
	if err := pool.QueryRow(ctx, `SELECT effectd.enqueue('e-7', 'sms', '{"to": "+15550001", "body": "hi"}')`).Scan(&dup); err != nil || dup {
		t.Fatalf("enqueue of an event from before the upgrade = %v, %v; want false", dup, err)
	}
	if err := pool.QueryRow(ctx, `SELECT effectd.enqueue('new-1', 'sms', '{"to": "+15550001", "body": "hi"}')`).Scan(&fresh); err != nil || !fresh {
		t.Fatalf("enqueue of a new event = %v, %v", fresh, err)
	}
	var newID int64
	pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'new-1'`).Scan(&newID)
	if newID <= before.lastID {
		t.Fatalf("the new intent has id %d, not after the last before the upgrade (%d)", newID, before.lastID)
	}
	// the call in flight over the upgrade completes once, on its own row
	var id int64
	var key string
	var created time.Time
	if err := pool.QueryRow(ctx, `SELECT id, idempotency_key, created_at FROM effectd.intents WHERE status = 'SENDING' ORDER BY id LIMIT 1`).
		Scan(&id, &key, &created); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var b intentdb.CompleteBatch
	b.Add(intentdb.Completion{ID: id, Key: key, CreatedAt: created, Attempts: 1, Status: "SENT", ProviderRef: "SMdone",
		NextAttemptAt: now, StartedAt: now, FinishedAt: now, Outcome: "sent", Called: true})
	fenced, err := intentdb.Complete(ctx, pool, &b, false)
	if err != nil || len(fenced) != 0 {
		t.Fatalf("completing a call in flight over the upgrade: fenced %+v, %v", fenced, err)
	}
	var status string
	var calls int
	pool.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM effectd.attempts WHERE intent_id = $1) FROM effectd.intents WHERE id = $1`, id).
		Scan(&status, &calls)
	if status != "SENT" || calls != 2 {
		t.Fatalf("the in-flight intent after its completion: %s with %d attempt rows, want SENT with 2", status, calls)
	}
}

// at012 returns a database at migration 012 (before day partitions) holding
// rows intents over 14 days in every state, an attempt each and a provider
// event per SMS.
func at012(t *testing.T, rows int) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `DROP SCHEMA effectd CASCADE`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.UpTo(ctx, pool, 12); err != nil {
		t.Fatal(err)
	}
	load := time.Now()
	for _, q := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('pay', 'stripe'), ('sms', 'twilio')`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, status, attempts, lease_expires_at,
		     provider_ref, delivery, created_at, updated_at)
		 SELECT 'e-' || g, ch, '{"to": "+15550001", "body": "hi"}', ch || ':e-' || g,
		        CASE WHEN g % 1000 = 1 THEN 'PENDING' WHEN g % 1000 = 2 THEN 'SENDING' WHEN g % 1000 = 3 THEN 'IN_DOUBT'
		             WHEN g % 100 = 4 THEN 'FAILED' ELSE 'SENT' END,
		        1, CASE WHEN g % 1000 = 2 THEN now() + interval '1 hour' END,
		        'ref-' || g, CASE WHEN g % 100 > 4 THEN 'delivered' END, at, at
		 FROM generate_series(1, $1::int) g,
		      LATERAL (SELECT (ARRAY['pay', 'sms'])[1 + g % 2] AS ch,
		                      now() - (($1::int - g) * (interval '14 days' / $1::int)) AS at) x`,
		`INSERT INTO effectd.attempts (intent_id, attempt, started_at, finished_at, outcome, provider_ref)
		 SELECT id, 1, created_at, created_at, 'sent', provider_ref FROM effectd.intents`,
		`INSERT INTO effectd.provider_events (provider, event_id, channel, intent_id, object_ref, type, outcome, payload, received_at)
		 SELECT 'twilio', provider_ref || ':delivered', channel, id, provider_ref, 'delivered', 'applied', '{}', created_at
		 FROM effectd.intents WHERE channel = 'sms'`,
		`VACUUM ANALYZE effectd.intents`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, rows)
		}
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	t.Logf("loaded %d intents at migration 012 in %s", rows, time.Since(load).Round(time.Millisecond))
	return pool
}

// TestUpgradeWithChecksMadeBefore: checks of the new bound made by hand before
// the upgrade (docs/deployment.md, "Upgrading a large deployment"), which do not hold writes, are what the
// upgrade uses: the first partitions end at their bound, the days after it get
// partitions of their own, and no partition keeps the check.
func TestUpgradeWithChecksMadeBefore(t *testing.T) {
	pool := at012(t, 2_000)
	ctx := context.Background()
	var bound time.Time
	if err := pool.QueryRow(ctx, `SELECT ((now() AT TIME ZONE 'UTC')::date + 2)::timestamp AT TIME ZONE 'UTC'`).Scan(&bound); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"intents", "created_at"}, {"attempts", "started_at"}, {"provider_events", "received_at"}} {
		for _, q := range []string{
			fmt.Sprintf(`ALTER TABLE effectd.%s ADD CONSTRAINT %s_partition_bound CHECK (%s < '%s') NOT VALID`, c[0], c[0], c[1], bound.Format(time.RFC3339)),
			fmt.Sprintf(`ALTER TABLE effectd.%s VALIDATE CONSTRAINT %s_partition_bound`, c[0], c[0]),
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	var upper time.Time
	if err := pool.QueryRow(ctx, `SELECT upper FROM effectd.partitions WHERE name = 'intents_p0'`).Scan(&upper); err != nil || !upper.Equal(bound) {
		t.Fatalf("intents_p0 ends at %v (%v), want the checked bound %v", upper, err, bound)
	}
	var left int
	pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conname ~ 'partition_bound'`).Scan(&left)
	if left != 0 {
		t.Fatalf("%d bound checks left after the upgrade", left)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, created_at)
		VALUES ('later', 'sms', '{}', 'sms:later', $1)`, bound.Add(time.Hour)); err != nil {
		t.Fatalf("a row after the bound: %v", err)
	}
}
