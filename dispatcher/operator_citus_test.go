//go:build citus

package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// citusProduce enqueues event on channel c with a producer's order of
// bucket i % buckets, in one transaction.
func citusProduce(t *testing.T, pool *pgxpool.Pool, buckets, i int, event string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO producer.orders (bucket, id) VALUES ($1, $2)`, i%buckets, i); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{"to": "+15005550006", "body": "hi"}', bucket => $2)`, event, i%buckets); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// citusStatus polls until every intent whose event id starts with prefix is
// in status, n of them.
func citusStatus(t *testing.T, pool *pgxpool.Pool, prefix, status string, n int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%d intents %s* %s", n, prefix, status), func() bool {
		var in, all int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = $2), count(*) FROM effectd.intents WHERE starts_with(event_id, $1)`,
			prefix, status).Scan(&in, &all); err != nil {
			t.Fatal(err)
		}
		return in == n && all == n
	})
}

// TestCitusOperatorReconcile: in the distributed mode an operator's reconcile
// (POST /v1/intents/{id}/reconcile) looks the intent up and settles it on its
// bucket's shard, with its lookup attempt beside it, its audit entry, and its
// count; a dry run and a lookup that cannot tell change nothing.
func TestCitusOperatorReconcile(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	found := false
	pol := fastPolicy("twilio")
	pol.InDoubt = policy.InDoubtManual
	chans := []dispatcher.Channel{{Name: "c", Kind: "twilio", Policy: pol, Provider: looking{maybeSentOnce(), func(string) (string, bool, error) {
		if found {
			return "SM-late", true, nil
		}
		return "", false, errors.New("cannot tell yet")
	}}}}
	d := run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	for i := range 3 {
		citusProduce(t, pool, buckets, i+5, fmt.Sprintf("e%d", i))
	}
	citusStatus(t, pool, "e", "IN_DOUBT", 3)
	var id, bucket int64
	if err := pool.QueryRow(ctx, `SELECT id, bucket FROM effectd.intents WHERE event_id = 'e1'`).Scan(&id, &bucket); err != nil {
		t.Fatal(err)
	}

	st, err := d.Reconcile(ctx, id, false, "tester")
	if err != nil || st.Outcome != dispatcher.LookupAmbiguous || st.To != statemachine.InDoubt || st.Applied {
		t.Fatalf("cannot tell: %+v, %v", st, err)
	}
	found = true
	if st, err = d.Reconcile(ctx, id, true, "tester"); err != nil || st.To != statemachine.Sent || st.Applied {
		t.Fatalf("dry run: %+v, %v", st, err)
	}
	st, err = d.Reconcile(ctx, id, false, "tester")
	if err != nil || !st.Applied || st.ProviderRef != "SM-late" {
		t.Fatalf("reconcile: %+v, %v", st, err)
	}
	var status, ref string
	var lookups int
	if err := pool.QueryRow(ctx, `
SELECT i.status, i.provider_ref,
       (SELECT count(*) FROM effectd.attempts a WHERE a.bucket = i.bucket AND a.intent_id = i.id AND a.kind = 'lookup' AND a.provider_ref = 'SM-late')
FROM effectd.intents i WHERE i.bucket = $1 AND i.id = $2`, bucket, id).Scan(&status, &ref, &lookups); err != nil {
		t.Fatal(err)
	}
	if status != "SENT" || ref != "SM-late" || lookups != 1 {
		t.Fatalf("after reconcile: %s %s, %d lookup attempts on its bucket", status, ref, lookups)
	}
	var n int
	var after string
	if err := pool.QueryRow(ctx, `SELECT count(*), max(after::text) FROM effectd.audit WHERE intent_id = $1 AND action = 'intent.reconcile'`, id).
		Scan(&n, &after); err != nil || n != 1 || !strings.Contains(after, `"status": "SENT"`) {
		t.Fatalf("audit: %d rows, after %s, %v", n, after, err)
	}
	if _, err := d.Reconcile(ctx, id, false, "tester"); !errors.Is(err, statemachine.ErrTransition) {
		t.Fatalf("reconcile of a SENT row: %v", err)
	}
	checkCitusCounts(t, pool, "after an operator's reconcile")
}

// TestCitusBulk: in the distributed mode a bulk retry freezes the FAILED
// intents of every bucket and applies them in one transaction per bucket
// (the operator attempts of a bucket share their transaction's time), each
// row fenced on the state it was frozen in (one that changed since is
// skipped), with an operator attempt and an audit entry per row, and the
// counts follow.
func TestCitusBulk(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if n == 1 && strings.HasPrefix(key, "c:b") {
			return "", providerErr{} // permanent: FAILED
		}
		return "ref-" + key, nil
	}}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	const n = 30
	for i := range n {
		citusProduce(t, pool, buckets, i, fmt.Sprintf("b%d", i))
	}
	citusStatus(t, pool, "b", "FAILED", n)
	checkCitusCounts(t, pool, "before the bulk retry")

	snap, err := operator.New(pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "tester",
		Request: effectdtype.BulkRequest{Action: "retry", Filter: effectdtype.BulkFilter{Status: "FAILED", Channel: "c"}, Reason: "provider fixed"}})
	if err != nil || snap.Matched != n || len(snap.Sample) == 0 {
		t.Fatalf("freeze: %+v, %v", snap, err)
	}
	// one row changes after the freeze: the apply skips it
	var moved int64
	if err := pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'b7'`).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	if _, _, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).Operate(ctx, operator.Operation{IntentID: moved, Event: statemachine.Requeue, Actor: "tester",
		Reason: "ahead of the bulk", Force: true}); err != nil {
		t.Fatal(err)
	}
	res, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "tester"})
	if err != nil || res.Applied != n-1 || res.Skipped != 1 {
		t.Fatalf("apply: %+v, %v; want %d applied, 1 skipped", res, err, n-1)
	}
	citusStatus(t, pool, "b", "SENT", n)
	var audits, operatorAttempts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE bulk_snapshot = $1::uuid`, snap.Snapshot).Scan(&audits); err != nil || audits != n-1 {
		t.Fatalf("audit entries of the snapshot: %d, %v; want %d", audits, err, n-1)
	}
	if err := pool.QueryRow(ctx, `
SELECT count(*) FROM effectd.attempts a JOIN effectd.intents i ON i.bucket = a.bucket AND i.id = a.intent_id
WHERE a.kind = 'operator'`).Scan(&operatorAttempts); err != nil || operatorAttempts != n {
		t.Fatalf("operator attempts on their intent's bucket: %d, %v; want %d", operatorAttempts, err, n)
	}
	var batches, bucketsApplied int
	if err := pool.QueryRow(ctx, `
SELECT count(DISTINCT (bucket, started_at)), count(DISTINCT bucket) FROM effectd.attempts
WHERE kind = 'operator' AND intent_id <> $1`, moved).Scan(&batches, &bucketsApplied); err != nil || batches != bucketsApplied || batches != buckets {
		t.Fatalf("the bulk's operator attempts: %d transactions over %d buckets, %v; want one per bucket, %d", batches, bucketsApplied, err, buckets)
	}
	if _, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "tester"}); !errors.Is(err, statemachine.ErrTransition) {
		t.Fatalf("second apply: %v", err)
	}
	checkCitusCounts(t, pool, "after the bulk retry")

	// IN_DOUBT intents resolved as resend in bulk: each is checked against
	// its provider's key window (a read of its attempts) in its bucket's
	// transaction, then sent again
	fixture.Intents(t, pool, 16, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Bucket(int64(g % 8)), fixture.Event(fmt.Sprintf("d%d", g)), fixture.Channel("c"),
			fixture.Status("IN_DOUBT")}
	})
	snap, err = operator.New(pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "tester",
		Request: effectdtype.BulkRequest{Action: "resolve", As: "resend", Filter: effectdtype.BulkFilter{Status: "IN_DOUBT"}, Reason: "lost calls"}})
	if err != nil || snap.Matched != 16 {
		t.Fatalf("freeze: %+v, %v", snap, err)
	}
	if res, err = operator.New(pool, storeOf(pool, effectdtype.Citus)).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "tester"}); err != nil || res.Applied != 16 {
		t.Fatalf("apply: %+v, %v; want 16 applied", res, err)
	}
	citusStatus(t, pool, "d", "SENT", 16)
	if err := pool.QueryRow(ctx, `
SELECT count(DISTINCT (a.bucket, a.started_at)), count(DISTINCT a.bucket) FROM effectd.attempts a
JOIN effectd.intents i ON i.bucket = a.bucket AND i.id = a.intent_id
WHERE a.kind = 'operator' AND starts_with(i.event_id, 'd')`).Scan(&batches, &bucketsApplied); err != nil || batches != bucketsApplied || batches != buckets {
		t.Fatalf("the resolve's operator attempts: %d transactions over %d buckets, %v; want one per bucket, %d", batches, bucketsApplied, err, buckets)
	}
	checkCitusCounts(t, pool, "after the bulk resolve")
}
