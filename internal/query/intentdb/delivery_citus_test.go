//go:build citus

package intentdb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/migrations"
)

// pgtest.Main stops the Citus cluster the tests of this binary started, if any.
func init() { pgtest.AtExit(citustest.Stop) }

// citusDB returns a pool on a fresh Citus database with producer.orders
// distributed by bucket, migrated and distributed with 8 buckets.
func citusDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := citustest.New(t)
	ctx := context.Background()
	citustest.ProducerOrders(t, pool)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.New(pool).Distribute(ctx, migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 8}); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestCitusEventLookupProbesIndexes: in the distributed mode a provider event
// carries no bucket, so the lookup of its intent's bucket reads every shard;
// it must do so by one index probe in each day partition of each shard, never
// by reading a partition or a whole index (its cost would grow with the
// history kept). By id it probes intents_id (the primary key there is
// (bucket, id), which cannot serve id alone); by reference, the partial
// index intents_provider_ref. Sequential scans are disabled on the workers
// too, so that the tiny test tables show which index paths exist: a full
// scan of a primary key would show as a scan of a _pkey index.
func TestCitusEventLookupProbesIndexes(t *testing.T) {
	pool := citusDB(t)
	ctx := context.Background()
	// day partitions made after distributing, as serve makes them: each gets
	// the index with its parent
	if _, _, err := retentiondb.AddPartitions(ctx, pool, 2); err != nil {
		t.Fatal(err)
	}
	var shards int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard s JOIN pg_inherits i ON i.inhrelid = s.logicalrelid
		WHERE i.inhparent = 'effectd.intents'::regclass`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	fixture.AddChannel(t, pool, "sms", "twilio")
	now := time.Now()
	fixture.Intents(t, pool, 64, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Bucket(int64(g % 8)), fixture.Event(fmt.Sprintf("e%d", g)), fixture.Channel("sms"),
			fixture.Status("SENT"), fixture.Attempts(0), fixture.ProviderRef(fmt.Sprintf("SM%d", g)),
			fixture.CreatedAt(now.Add(-time.Duration(g%2) * 24 * time.Hour))}
	})
	var id int64
	if err := pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'e5'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	plan := func(sql string, args ...any) string {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		for _, s := range []string{
			`SET LOCAL citus.propagate_set_commands TO 'local'`,
			`SET LOCAL enable_seqscan TO off`,
			`SET LOCAL citus.explain_all_tasks TO on`,
		} {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return pgtest.Plan(t, tx, "EXPLAIN (COSTS OFF) "+sql, args...)
	}
	scan := regexp.MustCompile(`(Seq Scan|Index Scan|Index Only Scan|Bitmap Index Scan)( using)? (on )?(\S+)`)
	for _, tc := range []struct {
		name, sql string
		args      []any
		index     string // every scan probes an index whose name has this
	}{
		{"by id", eventBucketByIDSQL, []any{"sms", id, "e5"}, "_id_"},
		{"by reference", eventBucketByRefSQL, []any{"sms", "SM5"}, "_provider_ref_"},
	} {
		p := plan(tc.sql, tc.args...)
		scans := scan.FindAllStringSubmatch(p, -1)
		if len(scans) != shards {
			t.Fatalf("%s: %d scans, want %d (one per day partition of each shard):\n%s", tc.name, len(scans), shards, p)
		}
		for _, s := range scans {
			if s[1] == "Seq Scan" || !strings.Contains(s[4], tc.index) || strings.Contains(s[4], "pkey") {
				t.Fatalf("%s: %q, want a probe of an index named %s…:\n%s", tc.name, s[0], tc.index, p)
			}
		}
		t.Logf("%s: %d index probes (%s)", tc.name, len(scans), scans[0][0])
	}
}

// TestCitusDeliveryStatementsReturnWhatMoved: each statement of the
// distributed mode that changes an intent's delivery returns, in the same
// statement, what a settled count needs (bucket, created_at, channel, old and
// new status, old and new delivery), and nothing when its compare-and-set
// fails: the delivery is part of every one, and so is the intent's key (a
// statement naming the id of an intent a failover lost, handed out again,
// writes nothing, not even an attempt).
func TestCitusDeliveryStatementsReturnWhatMoved(t *testing.T) {
	pool := citusDB(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "sms", "twilio")
	made := fixture.Intent(t, pool, fixture.Bucket(5), fixture.Event("e1"), fixture.Channel("sms"), fixture.Status("IN_DOUBT"))
	id, created := made.ID, made.CreatedAt
	moved := func(what string, want *DeliveryMoved) func(*DeliveryMoved, error) {
		return func(got *DeliveryMoved, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if want != nil {
				want.Bucket, want.CreatedAt, want.Channel = 5, created, "sms"
			}
			if got == nil || want == nil {
				if got != want {
					t.Fatalf("%s: %+v; want %+v", what, got, want)
				}
				return
			}
			g := *got
			g.CreatedAt = want.CreatedAt // compared apart: same instant, maybe another location
			if g != *want || !got.CreatedAt.Equal(want.CreatedAt) {
				t.Fatalf("%s: %+v; want %+v", what, *got, *want)
			}
		}
	}
	// Each statement first names intent id with the key of an intent a
	// failover lost ("sms:lost"), whose id was handed out again; the event's
	// lock too.
	var locked int64
	if err := pool.QueryRow(ctx, eventIntentBucketSQL, 5, id, "sms", "sms:lost").Scan(&locked); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("the event's lock with another intent's key: intent %d, %v; want no row", locked, err)
	}
	settle := SettleByEventParams{IntentID: id, Key: "sms:e1", Attempts: 1, From: "IN_DOUBT", ProviderRef: "SM1", Outcome: "settled", Delivery: "accepted"}
	staleSettle := settle
	staleSettle.Key = "sms:lost"
	moved("settle with another intent's key", nil)(SettleByEventBucket(ctx, pool, staleSettle, "", 5))
	moved("settle, delivery not unknown", nil)(SettleByEventBucket(ctx, pool, settle, "delivered", 5))
	moved("settle on another bucket", nil)(SettleByEventBucket(ctx, pool, settle, "", 4))
	moved("settle", &DeliveryMoved{OldStatus: "IN_DOUBT", Status: "SENT", Delivery: "accepted"})(SettleByEventBucket(ctx, pool, settle, "", 5))
	moved("settle again", nil)(SettleByEventBucket(ctx, pool, settle, "", 5))
	change := DeliveryChange{IntentID: id, Key: "sms:e1", From: "accepted", To: "delivered", Detail: "delivered"}
	staleChange := change
	staleChange.Key = "sms:lost"
	moved("set with another intent's key", nil)(SetDeliveryBucket(ctx, pool, staleChange, 5))
	moved("set", &DeliveryMoved{OldStatus: "SENT", Status: "SENT", OldDelivery: "accepted", Delivery: "delivered"})(SetDeliveryBucket(ctx, pool, change, 5))
	moved("set again", nil)(SetDeliveryBucket(ctx, pool, change, 5))
	poll := Poll{IntentID: id, Key: "sms:e1", Attempts: 1, From: "delivered", To: "undelivered", Detail: "undelivered 30003",
		StartedAt: time.Now(), Outcome: "poll", ProviderRef: "SM1"}
	stalePoll := poll
	stalePoll.Key = "sms:lost"
	moved("poll with another intent's key", nil)(RecordPollBucket(ctx, pool, stalePoll, 5))
	moved("poll", &DeliveryMoved{OldStatus: "SENT", Status: "SENT", OldDelivery: "delivered", Delivery: "undelivered"})(RecordPollBucket(ctx, pool, poll, 5))
	moved("poll again", nil)(RecordPollBucket(ctx, pool, poll, 5))
	var trail string
	if err := pool.QueryRow(ctx, `SELECT string_agg(kind || '@' || bucket, ' ' ORDER BY id) FROM effectd.attempts WHERE intent_id = $1`, id).Scan(&trail); err != nil {
		t.Fatal(err)
	}
	if trail != "callback@5 poll@5 poll@5" {
		t.Errorf("attempts: %q; want a callback and two polls on bucket 5, none for another intent's key", trail)
	}
}
