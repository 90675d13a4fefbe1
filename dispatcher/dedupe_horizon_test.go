package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/storage/onenode"
	"github.com/effectd/effectd/policy"
)

// TestRedeliveryAfterPruneIsDuplicate: within the dedupe horizon, a
// redelivered event whose intent's row was pruned inserts nothing, with or
// without occurred_at: its key outlives the row.
func TestRedeliveryAfterPruneIsDuplicate(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-p", Channel: "hook", Payload: `{}`}); err != nil || !ok {
		t.Fatalf("first enqueue = %v, %v", ok, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENT', updated_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := intentdb.Prune(ctx, pool, "hook", 10, time.Hour); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the intent pruned", n, err)
	}
	ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-p", Channel: "hook", Payload: `{}`})
	if err != nil || ok {
		t.Fatalf("redelivery after the prune = %v, %v; want a duplicate", ok, err)
	}
	if n := count(t, pool); n != 0 {
		t.Fatalf("%d intents after the redelivery, want none", n)
	}
}

// TestPruneDedupeKeys: a key goes once its channel's horizon has passed and
// no intents partition that could hold its intent is left; then, past the
// horizon, the event may be enqueued again.
func TestPruneDedupeKeys(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	for _, e := range []string{"gone", "horizon-left", "partition-left"} {
		if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: e, Channel: "hook", Payload: `{}`}); err != nil || !ok {
			t.Fatalf("enqueue %s = %v, %v", e, ok, err)
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM effectd.intents`); err != nil {
		t.Fatal(err)
	}
	// While the first partition (everything before the day partitions)
	// remains, every key may still be needed.
	if n, err := onenode.New(pool).PruneDedupeKeys(ctx, time.Now().AddDate(1, 0, 0)); err != nil || n != 0 {
		t.Fatalf("PruneDedupeKeys with the first partition there = %d, %v; want 0", n, err)
	}
	// As if the partitions before 2000-01-10 were dropped.
	if _, err := pool.Exec(ctx, `
UPDATE effectd.partitions SET lower = '2000-01-10' WHERE parent = 'intents' AND lower = '-infinity';
UPDATE effectd.dedupe_keys SET day = '2000-01-01', until = '2000-01-16' WHERE key = effectd.dedupe_key('hook', 'gone');
UPDATE effectd.dedupe_keys SET day = '2000-01-01', until = '2000-01-20' WHERE key = effectd.dedupe_key('hook', 'horizon-left');
UPDATE effectd.dedupe_keys SET day = '2000-01-10', until = '2000-01-16' WHERE key = effectd.dedupe_key('hook', 'partition-left')`); err != nil {
		t.Fatal(err)
	}
	n, err := onenode.New(pool).PruneDedupeKeys(ctx, time.Date(2000, 1, 18, 12, 0, 0, 0, time.UTC))
	if err != nil || n != 1 {
		t.Fatalf("PruneDedupeKeys = %d, %v; want the one key past its horizon and its partition", n, err)
	}
	for e, want := range map[string]bool{"gone": true, "horizon-left": false, "partition-left": false} {
		ok, err := enqueue(t, pool, dispatcher.Intent{EventID: e, Channel: "hook", Payload: `{}`})
		if err != nil || ok != want {
			t.Errorf("enqueue %s after the prune = %v, %v; want %v", e, ok, err, want)
		}
	}
}

// TestDedupeHorizonInSQL: the key of an enqueue keeps the channel's horizon
// as package policy computes it (DedupeHorizonDays), from the registered
// policy and from the admin API's override.
func TestDedupeHorizonInSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	long := policy.Default("webhook")
	long.Retention = policy.Duration(361 * time.Hour)
	wide := policy.Default("webhook")
	wide.DedupeDays = 40
	if err := dispatcher.Register(ctx, pool, []dispatcher.Channel{
		{Name: "long", Kind: "webhook", Policy: long}, {Name: "wide", Kind: "webhook", Policy: wide},
	}); err != nil {
		t.Fatal(err)
	}
	horizon := func(channel, event string) int {
		t.Helper()
		if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: event, Channel: channel, Payload: `{}`}); err != nil || !ok {
			t.Fatalf("enqueue %s/%s = %v, %v", channel, event, ok, err)
		}
		var days int
		if err := pool.QueryRow(ctx, `SELECT until - day FROM effectd.dedupe_keys WHERE key = effectd.dedupe_key($1, $2)`, channel, event).Scan(&days); err != nil {
			t.Fatal(err)
		}
		return days
	}
	if got, want := horizon("long", "e1"), long.DedupeHorizonDays(); got != want || want != 16 {
		t.Errorf("horizon of a 361h retention = %d days, want %d (16)", got, want)
	}
	if got := horizon("wide", "e1"); got != 40 {
		t.Errorf("horizon of dedupe_days 40 = %d days", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.channels SET policy_override = '{"dedupe_days": 50}' WHERE name = 'wide'`); err != nil {
		t.Fatal(err)
	}
	if got := horizon("wide", "e2"); got != 50 {
		t.Errorf("horizon of the override's dedupe_days 50 = %d days", got)
	}
}
