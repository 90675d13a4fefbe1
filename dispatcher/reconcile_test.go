package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// looking is a provider without keys whose first call may have been sent, and
// whose Lookup answers what the test says.
type looking struct {
	*scripted
	lookup func(key string) (string, bool, error)
}

func (l looking) Lookup(ctx context.Context, key string, _ json.RawMessage, _ map[string]string, created, claimed time.Time) (string, bool, error) {
	if claimed.Before(created) {
		return "", false, errors.New("claimed before created")
	}
	return l.lookup(key)
}

func maybeSentOnce() *scripted {
	return &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if n == 1 {
			return "", providerErr{retryable: true, maybeSent: true}
		}
		return "ref-resent", nil
	}}
}

func TestLookupSettles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		fallback string
		lookup   func(string) (string, bool, error)
		want     string
		ref      string
		calls    int
	}{
		{"found", "manual", func(string) (string, bool, error) { return "SM-found", true, nil }, "SENT", "SM-found", 1},
		{"found, a reference not UTF-8", "manual", func(string) (string, bool, error) { return "SM-\xff", true, nil }, "SENT", "SM-\uFFFD", 1},
		{"absent", "manual", func(string) (string, bool, error) { return "", false, nil }, "SENT", "ref-resent", 2},
		{"ambiguous manual", "manual", func(string) (string, bool, error) { return "", false, errors.New("2 matches") }, "IN_DOUBT", "", 1},
		{"ambiguous skip", "skip", func(string) (string, bool, error) { return "", false, errors.New("2 matches") }, "SKIPPED", "", 1},
		{"ambiguous resend", "resend", func(string) (string, bool, error) { return "", false, errors.New("timeout") }, "SENT", "ref-resent", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := maybeSentOnce()
			pol := fastPolicy("twilio")
			pol.InDoubt, pol.LookupFallback = policy.InDoubtLookup, c.fallback
			r := start(t, "twilio", looking{s, c.lookup}, pol)
			r.enqueue(t, "e")
			got := r.waitStatus(t, "e", c.want)
			if got.Ref != c.ref || s.Calls("c:e") != c.calls {
				t.Errorf("ref %q after %d calls; want %q after %d", got.Ref, s.Calls("c:e"), c.ref, c.calls)
			}
			if len(got.Outcomes) < 2 || got.Outcomes[0] != "send:maybe_sent" {
				t.Errorf("attempts = %v", got.Outcomes)
			}
		})
	}
}

// TestReconcileNow: an operator's reconcile of an IN_DOUBT row; a dry run
// changes nothing.
func TestReconcileNow(t *testing.T) {
	t.Parallel()
	found := false
	s := maybeSentOnce()
	pol := fastPolicy("twilio")
	pol.InDoubt = policy.InDoubtManual
	r := start(t, "twilio", looking{s, func(string) (string, bool, error) {
		if found {
			return "SM-late", true, nil
		}
		return "", false, errors.New("cannot tell yet")
	}}, pol)
	r.enqueue(t, "e")
	r.waitStatus(t, "e", "IN_DOUBT")
	var id int64
	r.pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id='e'`).Scan(&id)
	ctx := context.Background()

	st, err := r.d.Reconcile(ctx, id, false, "tester")
	if err != nil || st.Outcome != dispatcher.LookupAmbiguous || st.To != statemachine.InDoubt || st.Applied {
		t.Fatalf("cannot tell: %+v, %v", st, err)
	}
	found = true
	st, err = r.d.Reconcile(ctx, id, true, "tester")
	if err != nil || st.Outcome != dispatcher.LookupFound || st.To != statemachine.Sent || st.Applied {
		t.Fatalf("dry run: %+v, %v", st, err)
	}
	if got := r.row(t, "e"); got.Status != "IN_DOUBT" {
		t.Fatalf("dry run changed the row: %+v", got)
	}
	st, err = r.d.Reconcile(ctx, id, false, "tester")
	if err != nil || !st.Applied || st.ProviderRef != "SM-late" {
		t.Fatalf("reconcile: %+v, %v", st, err)
	}
	if got := r.row(t, "e"); got.Status != "SENT" || got.Ref != "SM-late" {
		t.Fatalf("after reconcile: %+v", got)
	}
	// One audit entry: the applied reconcile, not the refused or dry runs.
	var actor, after string
	var n int
	r.pool.QueryRow(ctx, `SELECT count(*), max(actor), max(after::text) FROM effectd.audit WHERE intent_id = $1 AND action = 'intent.reconcile'`, id).Scan(&n, &actor, &after)
	if n != 1 || actor != "tester" || !strings.Contains(after, `"status": "SENT"`) {
		t.Fatalf("audit = %d rows, actor %q, after %s", n, actor, after)
	}
	// SENT now: nothing to reconcile.
	if _, err := r.d.Reconcile(ctx, id, false, "tester"); !errors.Is(err, statemachine.ErrTransition) {
		t.Fatalf("reconcile of a SENT row: %v", err)
	}
	if _, err := r.d.Reconcile(ctx, 999999, false, "tester"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("reconcile of a missing row: %v", err)
	}
}

// keepLonger registers a channel that keeps history longer than the test's
// channel, which the pruner then prunes row by row rather than leaving its
// rows to their day partitions.
func keepLonger(t *testing.T, r rig) {
	t.Helper()
	fixture.AddChannel(t, r.pool, "keeps-longer", "webhook", fixture.Policy(`{"retention": "360h"}`))
}

// TestPrune deletes only terminal rows past retention, with their attempts.
func TestPrune(t *testing.T) {
	t.Parallel()
	s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pol := fastPolicy("webhook")
	pol.Retention = policy.Duration(time.Hour)
	r := start(t, "webhook", keyedProvider{s}, pol)
	keepLonger(t, r)
	r.enqueue(t, "old-sent", "new-sent")
	r.waitStatus(t, "old-sent", "SENT")
	r.waitStatus(t, "new-sent", "SENT")
	ctx := context.Background()
	// Rows an operator must still see, however old: IN_DOUBT; and one not yet due.
	// (not due for a day, so the running dispatcher leaves it alone).
	twoHoursAgo := time.Now().Add(-2 * time.Hour)
	fixture.Intent(t, r.pool, fixture.Event("old-doubt"), fixture.Channel("c"), fixture.Status("IN_DOUBT"), fixture.UpdatedAt(twoHoursAgo))
	fixture.Intent(t, r.pool, fixture.Event("old-pending"), fixture.Channel("c"), fixture.UpdatedAt(twoHoursAgo),
		fixture.NextAttemptAt(time.Now().Add(24*time.Hour)))
	r.pool.Exec(ctx, `UPDATE effectd.intents SET updated_at = now() - interval '2 hours' WHERE event_id = 'old-sent'`)
	n, err := dispatcher.Prune(ctx, r.d)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	var left []string
	rows, _ := r.pool.Query(ctx, `SELECT event_id FROM effectd.intents ORDER BY event_id`)
	for rows.Next() {
		var s string
		rows.Scan(&s)
		left = append(left, s)
	}
	if len(left) != 3 || left[0] != "new-sent" || left[1] != "old-doubt" || left[2] != "old-pending" {
		t.Fatalf("left = %v", left)
	}
	var orphans int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts a WHERE NOT EXISTS (SELECT 1 FROM effectd.intents i WHERE i.id = a.intent_id)`).Scan(&orphans)
	if orphans != 0 {
		t.Fatalf("%d attempt rows left without their intent", orphans)
	}
}

// TestReconcileRefusesLiveLease: a SENDING row whose lease is live may have a
// call in flight; reconciling it now is refused as a transition conflict.
func TestReconcileRefusesLiveLease(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { <-release; return "ref", nil }}
	pol := fastPolicy("twilio")
	pol.Lease = policy.Duration(time.Minute)
	r := start(t, "twilio", looking{s, func(string) (string, bool, error) { return "", false, nil }}, pol)
	defer close(release)
	r.enqueue(t, "e")
	r.waitStatus(t, "e", "SENDING")
	var id int64
	r.pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id='e'`).Scan(&id)
	_, err := r.d.Reconcile(context.Background(), id, false, "tester")
	var le *dispatcher.LeaseError
	if !errors.As(err, &le) || !errors.Is(err, statemachine.ErrTransition) || time.Until(le.Until) < 30*time.Second {
		t.Fatalf("Reconcile of a live lease: %v", err)
	}
	// The reconciler's own loop leaves it alone too: a row whose lease did
	// expire is settled (looked up, found absent, claimed again) while "e" stays
	// with its one call and no lookup.
	seedAged(t, r.pool, "c", "twilio", "crashed", statemachine.Sending, time.Minute, false)
	eventually(t, 10*time.Second, "the expired lease is settled", func() bool { return r.row(t, "crashed").Attempts == 2 })
	if got := r.row(t, "e"); got.Status != "SENDING" || got.Attempts != 1 || len(got.Outcomes) != 0 || s.Calls("c:e") != 1 {
		t.Fatalf("the reconciler took a live lease: %+v after %d calls", got, s.Calls("c:e"))
	}
}

// TestPruneOneInstanceAtATime: while one instance holds the prune lock, another
// instance's Prune returns at once without deleting.
func TestPruneOneInstanceAtATime(t *testing.T) {
	t.Parallel()
	s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pol := fastPolicy("webhook")
	pol.Retention = policy.Duration(time.Hour)
	r := start(t, "webhook", keyedProvider{s}, pol)
	// the only channel, so its retention is the longest; it is shorter than a
	// day, so its rows are still deleted one by one
	r.enqueue(t, "old")
	r.waitStatus(t, "old", "SENT")
	ctx := context.Background()
	r.pool.Exec(ctx, `UPDATE effectd.intents SET updated_at = now() - interval '2 hours'`)
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, 0x65666670) // another instance is pruning
	if n, err := dispatcher.Prune(ctx, r.d); err != nil || n != 0 {
		t.Fatalf("Prune while another instance prunes = %d, %v; want 0, nil", n, err)
	}
	conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, 0x65666670)
	if n, err := dispatcher.Prune(ctx, r.d); err != nil || n != 1 {
		t.Fatalf("Prune after = %d, %v; want 1", n, err)
	}
}

// TestReconcileRacingResolve: an operator's reconcile of an IN_DOUBT row asks
// the provider; while the lookup runs, another operator resolves the row as
// sent. The lookup then answers "absent", but the row it read is gone: the
// settlement must not apply (which would send the effect a second time).
func TestReconcileRacingResolve(t *testing.T) {
	t.Parallel()
	entered, answer := make(chan struct{}), make(chan struct{})
	s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref-resent", nil }}
	pol := fastPolicy("twilio")
	pol.InDoubt = policy.InDoubtManual
	r := start(t, "twilio", looking{s, func(string) (string, bool, error) {
		close(entered)
		<-answer
		return "", false, nil // absent
	}}, pol)
	id := seedAged(t, r.pool, "c", "twilio", "e", statemachine.InDoubt, time.Minute, true)
	ctx := context.Background()
	done := make(chan effectdtype.ReconcileResult, 1)
	go func() {
		st, err := r.d.Reconcile(ctx, id, false, "first-operator")
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	<-entered
	if _, _, err := operator.New(r.pool, storeOf(r.pool, effectdtype.SingleNode)).Operate(ctx, operator.Operation{IntentID: id, Event: statemachine.ResolveSent,
		Actor: "second-operator", ProviderRef: "SM-by-hand"}); err != nil {
		t.Fatal(err)
	}
	close(answer)
	st := <-done
	if st.Applied {
		t.Errorf("the stale settlement applied: %+v", st)
	}
	// Had it applied, the row would be PENDING and sent again: prove it is not
	// by sending another intent through the same channel.
	if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: "probe", Channel: "c", Payload: `{"to":"+15005550006","body":"hi"}`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.waitStatus(t, "probe", "SENT")
	if got := r.row(t, "e"); got.Status != "SENT" || got.Ref != "SM-by-hand" || s.Calls("c:e") != 0 {
		t.Fatalf("after the race: %+v, %d calls; want SENT by hand, never called", got, s.Calls("c:e"))
	}
}

// replaying is a looker whose lookup repeats the call with its key, as
// Stripe's does inside its key window: each lookup is counted.
type replaying struct {
	looking
	lookups *atomic.Int64
}

func (r replaying) Lookup(ctx context.Context, key string, raw json.RawMessage, meta map[string]string, created, claimed time.Time) (string, bool, error) {
	r.lookups.Add(1)
	return r.looking.Lookup(ctx, key, raw, meta, created, claimed)
}

func (r replaying) LookupReplays(time.Time) bool { return true }

// TestReconcileDryRunDoesNotReplay: a dry run does not call a lookup that
// repeats the call with its key (it could apply the effect: a refund made by
// a dry run), and says so; a real reconcile does call it.
func TestReconcileDryRunDoesNotReplay(t *testing.T) {
	t.Parallel()
	var lookups atomic.Int64
	pol := fastPolicy("twilio")
	pol.InDoubt = policy.InDoubtManual
	r := start(t, "twilio", replaying{looking{maybeSentOnce(), func(string) (string, bool, error) {
		return "re_replayed", true, nil
	}}, &lookups}, pol)
	r.enqueue(t, "e")
	r.waitStatus(t, "e", "IN_DOUBT")
	var id int64
	ctx := context.Background()
	r.pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id='e'`).Scan(&id)
	st, err := r.d.Reconcile(ctx, id, true, "tester")
	if err != nil || st.Outcome != dispatcher.NotLookedUp || st.To != statemachine.InDoubt || st.Applied || lookups.Load() != 0 {
		t.Fatalf("dry run: %+v, %v, %d lookups; want not_looked_up and no lookup", st, err, lookups.Load())
	}
	st, err = r.d.Reconcile(ctx, id, false, "tester")
	if err != nil || st.Outcome != dispatcher.LookupFound || !st.Applied || lookups.Load() != 1 {
		t.Fatalf("reconcile: %+v, %v, %d lookups", st, err, lookups.Load())
	}
}
