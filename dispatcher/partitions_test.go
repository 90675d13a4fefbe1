package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage/onenode"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// TestDropsExpiredPartitions: the pruner drops whole the day partitions whose
// history has passed the retention, keeps the one that holds an IN_DOUBT row,
// drops a day's attempts and provider events only once no intents partition
// they may belong to is left, takes the dropped rows out of the settled
// counts, and deletes nothing row by row.
func TestDropsExpiredPartitions(t *testing.T) {
	t.Parallel()
	s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pol := fastPolicy("webhook")
	pol.Retention = policy.Duration(24 * time.Hour)
	r := start(t, "webhook", keyedProvider{s}, pol)
	ctx := context.Background()
	// Days 5 to 2 before today, each with three SENT intents, an attempt each
	// and a provider event; day 2 also holds an IN_DOUBT intent. The table
	// the migration made its first partition (everything before tomorrow) is
	// replaced by partitions of those days.
	if err := harnessdb.DayPartitions(ctx, r.pool, 5); err != nil {
		t.Fatal(err)
	}
	made := fixture.Intents(t, r.pool, 12, func(k int) []fixture.IntentOption {
		d, n := 2+(k-1)/3, 1+(k-1)%3
		at := fixture.Day(-d).Add(time.Hour)
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("d%d-%d", d, n)), fixture.Channel("c"), fixture.Status("SENT"),
			fixture.Attempts(0), fixture.CreatedAt(at), fixture.UpdatedAt(at)}
	})
	at := fixture.Day(-2).Add(2 * time.Hour)
	made = append(made, fixture.Intent(t, r.pool, fixture.Event("d2-doubt"), fixture.Channel("c"), fixture.Status("IN_DOUBT"),
		fixture.Attempts(0), fixture.CreatedAt(at), fixture.UpdatedAt(at)))
	for _, m := range made {
		fixture.AddAttempts(t, r.pool, fixture.Attempt{IntentID: m.ID, StartedAt: m.CreatedAt.Add(time.Second), Unfinished: true})
		fixture.AddProviderEvents(t, r.pool, fixture.ProviderEvent{Provider: "twilio", EventID: "ev-" + m.EventID, Channel: "c",
			IntentID: m.ID, Type: "delivered", Outcome: "applied", ReceivedAt: m.CreatedAt.Add(time.Minute)})
	}
	if err := readdb.FoldSettledCounts(ctx, r.pool); err != nil { // the counts of the days to drop are folded, not only deltas
		t.Fatal(err)
	}
	day := func(d int) string { return time.Now().UTC().AddDate(0, 0, -d).Format("20060102") }
	want := []string{
		"attempts_p" + day(1), "attempts_p" + day(2), "attempts_p" + day(3),
		"intents_p" + day(1), "intents_p" + day(2),
		"provider_events_p" + day(1), "provider_events_p" + day(2), "provider_events_p" + day(3),
	}
	slices.Sort(want)
	var left []string
	// The running dispatcher's own reads of intents (its folds and gauges) can
	// hold a lock past the prune's lock wait on a loaded machine: a prune then
	// leaves the partitions for the next one (counted busy), as in production.
	// Prune again until they are gone, each round deleting nothing row by row.
	for round := 0; round < 20 && !slices.Equal(left, want); round++ {
		n, err := dispatcher.Prune(ctx, r.d)
		if err != nil || n != 0 {
			t.Fatalf("Prune = %d, %v; want no row deleted one by one", n, err)
		}
		left = nil
		rows, _ := r.pool.Query(ctx, `SELECT name FROM effectd.partitions WHERE upper <= now() ORDER BY name`)
		for rows.Next() {
			var s string
			rows.Scan(&s)
			left = append(left, s)
		}
	}
	if !slices.Equal(left, want) {
		t.Fatalf("partitions left of the past days after 20 prunes: %v\nwant %v", left, want)
	}
	var tables int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'effectd' AND tablename ~ '_p[0-9]+$' AND tablename !~ $1`,
		day(0)+"|"+day(-1)+"|"+day(-2)+"|"+day(-3)).Scan(&tables)
	if tables != len(want) {
		t.Fatalf("%d tables of past days left, want %d: a dropped partition's table is still there", tables, len(want))
	}
	// and the days ahead have their partitions, three after today
	var ahead int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.partitions WHERE parent = 'intents' AND lower > now()`).Scan(&ahead)
	if ahead != 3 {
		t.Fatalf("%d intents partitions for the days after today, want 3", ahead)
	}
	var intents, doubt int
	r.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'IN_DOUBT') FROM effectd.intents`).Scan(&intents, &doubt)
	if intents != 4 || doubt != 1 {
		t.Fatalf("%d intents left (%d IN_DOUBT), want day 2's three SENT and its IN_DOUBT", intents, doubt)
	}
	var counted, sent int
	r.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM (SELECT n FROM effectd.intent_counts WHERE channel = 'c' AND status = 'SENT'
		UNION ALL SELECT n FROM effectd.intent_count_deltas WHERE channel = 'c' AND status = 'SENT') k`).Scan(&counted)
	r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE channel = 'c' AND status = 'SENT'`).Scan(&sent)
	if counted != sent {
		t.Fatalf("the settled counts say %d SENT, the table holds %d", counted, sent)
	}
}

// TestDropsExpiredPartitionsTogether: on one PostgreSQL the expired
// partitions of intents, attempts and provider events are detached in one
// transaction (an event trigger records the transaction of every ALTER TABLE
// and the table of every DROP), so that each session using the tables plans
// its statements again once, and their tables are dropped after it; while an
// open transaction holds intents longer than the lock wait allows, they are
// detached one by one instead (concurrently, each in transactions of its
// own). Either way none is left, and a table a crash left detached and
// forgotten goes at the next prune.
func TestDropsExpiredPartitionsTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, busy := range []bool{false, true} {
		pool := pgtest.New(t)
		if err := harnessdb.DayPartitions(ctx, pool, 4); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE public.ddl (xid xid8, tag text, name text)`,
			`CREATE FUNCTION public.record_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
			 BEGIN
			     INSERT INTO public.ddl SELECT pg_current_xact_id(), 'DROP', object_name
			     FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table';
			 END $$`,
			`CREATE FUNCTION public.record_alter() RETURNS event_trigger LANGUAGE plpgsql AS $$
			 BEGIN
			     INSERT INTO public.ddl SELECT pg_current_xact_id(), command_tag, object_identity
			     FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'ALTER TABLE';
			 END $$`,
			`CREATE EVENT TRIGGER record_drop ON sql_drop EXECUTE FUNCTION public.record_drop()`,
			`CREATE EVENT TRIGGER record_alter ON ddl_command_end EXECUTE FUNCTION public.record_alter()`,
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if busy {
			open, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := open.Exec(ctx, `SELECT count(*) FROM effectd.intents`); err != nil {
				t.Fatal(err)
			}
			// held for longer than every try of the drop together (3 of a
			// 50 ms lock wait and a 150 ms pause: retention.LockWait,
			// LockPause), and less than the 20 of each drop one by one
			time.AfterFunc(1600*time.Millisecond, func() { open.Rollback(ctx) })
		}
		// the days to the day before yesterday: 3 of intents, and 2 each of
		// attempts and provider events (such a partition waits until the
		// intents partition of the day after it is gone)
		today := time.Now().UTC().Truncate(24 * time.Hour)
		dropped, held, err := onenode.New(pool).DropExpiredPartitions(ctx, time.Since(today.Add(-time.Hour)))
		if err != nil || held != 0 {
			t.Fatalf("busy %v: DropExpiredPartitions: %v, held %d", busy, err, held)
		}
		var tables, detaches, xacts int
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tag = 'DROP'), count(*) FILTER (WHERE tag = 'ALTER TABLE'),
			count(DISTINCT xid) FILTER (WHERE tag = 'ALTER TABLE') FROM public.ddl`).Scan(&tables, &detaches, &xacts); err != nil {
			t.Fatal(err)
		}
		if len(dropped) != 7 || tables != len(dropped) || detaches < len(dropped) {
			t.Fatalf("busy %v: dropped %d partitions, %d tables after %d detaches; want 7", busy, len(dropped), tables, detaches)
		}
		if !busy && xacts != 1 {
			t.Errorf("detached %d partitions in %d transactions, want 1", detaches, xacts)
		}
		if busy && xacts < len(dropped) {
			t.Errorf("with intents busy: detached %d partitions in %d transactions, want one each at least", len(dropped), xacts)
		}
	}

	// a table detached and forgotten, whose drop a crash cut short
	pool := pgtest.New(t)
	if err := harnessdb.DayPartitions(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	name := "intents_p" + time.Now().UTC().AddDate(0, 0, -1).Format("20060102")
	if _, err := pool.Exec(ctx, `ALTER TABLE effectd.intents DETACH PARTITION effectd.`+name); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM effectd.partitions WHERE name = $1`, name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := onenode.New(pool).DropExpiredPartitions(ctx, 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	var left bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, "effectd."+name).Scan(&left); err != nil || left {
		t.Errorf("%s, detached and forgotten, still there after a prune (%v)", name, err)
	}
}

// TestPruneKeepsRowRequeuedBeforeDetach: when the expired partitions are
// dropped one by one (a transaction holds provider_events, so the tables'
// locks are not free together), an operator's requeue of a FAILED intent
// committed after its partition's first check and before its detach keeps
// the partition: the check made again once writers cannot reach it finds the
// PENDING row, and the partition is attached again, not dropped with it.
func TestPruneKeepsRowRequeuedBeforeDetach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := harnessdb.DayPartitions(ctx, pool, 4); err != nil {
		t.Fatal(err)
	}
	fixture.AddChannel(t, pool, "c", "webhook")
	at := fixture.Day(-3).Add(time.Hour)
	id := fixture.Intent(t, pool, fixture.Event("failed-3"), fixture.Channel("c"), fixture.Status("FAILED"),
		fixture.CreatedAt(at), fixture.UpdatedAt(at)).ID
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `SELECT count(*) FROM effectd.provider_events`); err != nil {
		t.Fatal(err)
	}
	day3 := "intents_p" + time.Now().UTC().AddDate(0, 0, -3).Format("20060102")
	requeued := false
	ctx = dispatcher.WithPartitionChecked(ctx, func(p retentiondb.Partition) {
		if p.Name != day3 || requeued {
			return
		}
		requeued = true
		if _, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, operator.Operation{IntentID: id, Event: statemachine.Requeue,
			Actor: "oncall", Reason: "provider fixed", Force: true}); err != nil {
			t.Errorf("requeue of intent %d: %v", id, err)
		}
		blocker.Rollback(ctx) // the other partitions drop without waiting for it
	})
	today := time.Now().UTC().Truncate(24 * time.Hour)
	dropped, held, err := onenode.New(pool).DropExpiredPartitions(ctx, time.Since(today.Add(-time.Hour)))
	if err != nil {
		t.Fatalf("DropExpiredPartitions: %v", err)
	}
	if !requeued {
		t.Fatalf("%s was not dropped one by one (dropped %v)", day3, dropped)
	}
	var status string
	if err := pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&status); err != nil || status != "PENDING" {
		t.Fatalf("intent %d requeued between the check and the detach: %q, %v; want it PENDING in its partition", id, status, err)
	}
	var attached bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1))
		AND EXISTS (SELECT 1 FROM effectd.partitions WHERE name = $2)`, "effectd."+day3, day3).Scan(&attached); err != nil || !attached {
		t.Errorf("%s attached and registered: %v, %v", day3, attached, err)
	}
	if held != 1 {
		t.Errorf("held %d partitions, want 1 (%s)", held, day3)
	}
	for _, p := range dropped {
		if p.Name == day3 {
			t.Errorf("%s counted dropped", day3)
		}
	}
}
