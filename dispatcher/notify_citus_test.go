//go:build citus

package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// quotedErr is a permanent provider error that quotes the payload's number,
// as Twilio's 21211 does: the notification's copy must mask it.
type quotedErr struct{ providerErr }

func (quotedErr) Error() string {
	return "twilio 21211: The 'To' number +15005550006 is not a valid phone number"
}

// notifyScenario runs, on pool (the distributed mode with buckets buckets, or
// one PostgreSQL with buckets 0), a dispatcher whose channels sms (twilio,
// redacting "to"), wh (webhook) and poll (twilio, delivery polled) notify the
// webhook channel hook (registered, not served) of every outcome, and drives each kind of statement
// that reaches one: completions (sent, failed; a webhook's delivered), an
// operator's cancel and requeue (failed again: told once, though the first
// notice is in another day partition), a producer's cancel, a bulk cancel,
// the reconciler's settlement of a timed-out call (in_doubt), provider events
// (that call settled sent; delivered, then its repeat) and a delivery poll
// (undelivered); each source is enqueued in a trace of its own. It returns
// each notification as the producer would read it, with intent ids named by
// their event id (the ids differ between databases), and whether it is on its
// source's bucket and in its source's trace.
func notifyScenario(t *testing.T, pool *pgxpool.Pool, buckets int) []string {
	t.Helper()
	ctx := context.Background()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch {
		case strings.HasSuffix(key, ":fail"):
			return "", quotedErr{}
		case strings.HasSuffix(key, ":maybe"):
			return "", providerErr{retryable: true, maybeSent: true}
		}
		return "SM-" + key, nil
	}}
	poller := &polled{polls: map[string]int{}, statuses: []string{"undelivered"}}
	pollPolicy := fastPolicy("twilio")
	pollPolicy.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond)}
	all := &dispatcher.Notify{Channel: "hook", On: dispatcher.NotifyOutcomes}
	chans := []dispatcher.Channel{
		{Name: "sms", Kind: "twilio", Provider: p, Policy: fastPolicy("twilio"), Redact: []string{"to"}, Notify: all},
		{Name: "wh", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook"), Notify: all},
		{Name: "poll", Kind: "twilio", Provider: poller, Policy: pollPolicy, Notify: all},
	}
	// hook is registered, not served: its notifications stay as written
	hook := dispatcher.Channel{Name: "hook", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}
	if err := dispatcher.Register(ctx, pool, []dispatcher.Channel{hook}); err != nil {
		t.Fatal(err)
	}
	d := run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond, DeliveryPollInterval: time.Hour})
	if buckets > 0 {
		eventually(t, 20*time.Second, "the dispatcher serves every bucket", func() bool {
			return len(dispatcher.OwnedBuckets(d)) == buckets
		})
	}
	produce := func(i int, channel, event string, later bool) {
		t.Helper()
		var notBefore *time.Time
		if later {
			nb := time.Now().Add(time.Hour)
			notBefore = &nb
		}
		// each source in a trace of its own, which its notifications join
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT set_config('effectd.traceparent', $1, true)`, fmt.Sprintf("00-%032x-%016x-01", i, i)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{"to": "+15005550006", "body": "hi"}',
			not_before => $3, bucket => $4)`, event, channel, notBefore, i%8); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	status := func(event string) (id int64, s string) {
		t.Helper()
		pool.QueryRow(ctx, `SELECT id, status FROM effectd.intents WHERE event_id = $1`, event).Scan(&id, &s)
		return id, s
	}
	wait := func(event, want string) int64 {
		t.Helper()
		var id int64
		eventually(t, 30*time.Second, event+" "+want, func() bool {
			var s string
			id, s = status(event)
			return s == want
		})
		return id
	}
	notices := func() int {
		var n int
		var told string
		pool.QueryRow(ctx, `SELECT count(*), string_agg(event_id, ' ') FROM effectd.intents WHERE channel = 'hook'`).Scan(&n, &told)
		if testing.Verbose() {
			t.Logf("%d notices: %s", n, told)
		}
		return n
	}
	produce(1, "sms", "s1", false)
	produce(2, "sms", "s2:fail", false)
	produce(3, "sms", "s3", true)
	produce(4, "sms", "s4", true)
	produce(5, "wh", "w5", false)
	produce(6, "poll", "p6", false)
	produce(7, "sms", "s7:maybe", false)
	produce(8, "sms", "s8", true)
	sent := wait("s1", "SENT")
	failed := wait("s2:fail", "FAILED")
	wait("w5", "SENT")
	wait("p6", "SENT")
	maybe := wait("s7:maybe", "IN_DOUBT") // a Twilio call that timed out: the reconciler's settlement
	eventually(t, 30*time.Second, "sent, failed, sent and delivered, sent, in_doubt told", func() bool { return notices() == 6 })

	// the first notice of the failure moves to the next day's partition: the
	// second failure must find it there
	// (a constant: Citus refuses created_at + interval, a STABLE operator, in
	// an UPDATE)
	var created time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM effectd.intents WHERE channel = 'hook' AND event_id = 'sms:s2:fail:failed'`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET created_at = $1 WHERE channel = 'hook' AND event_id = 'sms:s2:fail:failed'`,
		created.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	mode := storeOf(pool, effectdtype.SingleNode)
	if buckets > 0 {
		mode = storeOf(pool, effectdtype.Citus)
	}
	operate := func(id int64, ev statemachine.Event) {
		t.Helper()
		if _, _, err := operator.New(pool, mode).Operate(ctx, operator.Operation{IntentID: id, Event: ev, Actor: "test", Reason: "test", Force: true}); err != nil {
			t.Fatalf("%s %d: %v", ev, id, err)
		}
	}
	s3, _ := status("s3")
	operate(s3, statemachine.Cancel)
	// a producer's cancel, in a transaction of another trace (before the
	// bulk cancel, which would take it): the notification joins the source's
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('effectd.traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', true)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT effectd.cancel('s8', 'sms', 'test', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	operate(failed, statemachine.Requeue)
	wait("s2:fail", "FAILED")
	snap, err := operator.New(pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "test",
		Request: effectdtype.BulkRequest{Action: "cancel", Filter: effectdtype.BulkFilter{Status: "PENDING", Channel: "sms"}, Reason: "test"}})
	if err != nil || snap.Matched != 1 {
		t.Fatalf("freeze: %+v, %v", snap, err)
	}
	if res, err := operator.New(pool, mode).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "test"}); err != nil || res.Applied != 1 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	for range 2 { // the repeat changes nothing
		if _, err := d.RecordEvent(ctx, twilioEventOn("sms", sent, "s1", "SM-sms:s1", "delivered", statemachine.Delivered)); err != nil {
			t.Fatal(err)
		}
	}
	// the timed-out call settled SENT by its callback
	if _, err := d.RecordEvent(ctx, twilioEventOn("sms", maybe, "s7:maybe", "SM7", "sent", statemachine.Accepted)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the poll", func() bool {
		n, err := dispatcher.PollDeliveries(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	eventually(t, 30*time.Second, "cancelled thrice, delivered, sent and undelivered told", func() bool { return notices() >= 12 })

	bucket := "0"
	if buckets > 0 {
		bucket = "bucket"
	}
	type source struct {
		event       string
		bucket      int64
		traceparent string
	}
	sources := map[int64]source{}
	rows, err := pool.Query(ctx, `SELECT id, event_id, `+bucket+`, coalesce(traceparent, '') FROM effectd.intents WHERE channel <> 'hook'`)
	if err != nil {
		t.Fatal(err)
	}
	var id, b int64
	var ev, tp string
	if _, err := pgx.ForEachRow(rows, []any{&id, &ev, &b, &tp}, func() error { sources[id] = source{ev, b, tp}; return nil }); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `
SELECT event_id, channel, idempotency_key, ordering_key, occurred_at IS NULL, payload::text, `+bucket+`, coalesce(traceparent, '')
FROM effectd.intents WHERE channel = 'hook' ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var ev, ch, key, ordering, payload, tp string
		var noOccurred bool
		var b int64
		if err := row.Scan(&ev, &ch, &key, &ordering, &noOccurred, &payload, &b, &tp); err != nil {
			return "", err
		}
		var p struct {
			Type   string         `json:"type"`
			Intent map[string]any `json:"intent"`
		}
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			return "", err
		}
		src := sources[int64(p.Intent["id"].(float64))]
		p.Intent["id"] = "@" + src.event
		named, _ := json.Marshal(p)
		return fmt.Sprintf("%s on %s key %s ordering %s occurred_at null %v same bucket %v same trace %v: %s",
			ev, ch, key, ordering, noOccurred, b == src.bucket, tp != "" && tp == src.traceparent, named), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// twilioEventOn is a Twilio status callback about intent id (of the
// producer's event) of channel.
func twilioEventOn(channel string, id int64, event, sid, status string, delivery statemachine.Delivery) dispatcher.ProviderEvent {
	ev := twilioEvent(id, event, sid, status, delivery, "")
	ev.Channel = channel
	return ev
}

// TestCitusNotify: in the distributed mode, where no trigger may write them,
// the statements that move an intent to an outcome write the producer's
// notifications themselves, on the intent's bucket, exactly as the notify
// trigger does on one PostgreSQL: the same event ids, idempotency and
// ordering keys, payloads (the delivery as the outcome left it, the source
// channel's redacted values masked), the source's traceparent, and each
// outcome told once, whether it is reached by a completion, the reconciler,
// an operator, a producer's cancel, a bulk action, a provider event or a
// delivery poll. The counts by status still equal the
// rows.
func TestCitusNotify(t *testing.T) {
	single := notifyScenario(t, pgtest.New(t), 0)
	pool := citusPool(t, 8)
	distributed := notifyScenario(t, pool, 8)
	if !slices.Equal(single, distributed) {
		t.Errorf("distributed mode differs from one PostgreSQL:\n--- one PostgreSQL\n%s\n--- distributed\n%s",
			strings.Join(single, "\n"), strings.Join(distributed, "\n"))
	}
	for _, want := range []string{
		`sms:s1:delivered on hook key hook:sms:s1:delivered ordering sms:s1 occurred_at null true same bucket true same trace true: {"type":"effect.delivered","intent":{"channel":"sms","delivery":"delivered","delivery_detail":"delivered","event_id":"s1","id":"@s1","last_error":null,"provider_ref":"SM-sms:s1","status":"SENT"}}`,
		`sms:s2:fail:failed on hook key hook:sms:s2:fail:failed ordering sms:s2:fail occurred_at null true same bucket true same trace true: {"type":"effect.failed","intent":{"channel":"sms","delivery":null,"delivery_detail":null,"event_id":"s2:fail","id":"@s2:fail","last_error":"twilio 21211: The 'To' number *** is not a valid phone number","provider_ref":null,"status":"FAILED"}}`,
		`sms:s3:cancelled on hook`,
		`sms:s4:cancelled on hook`,
		`wh:w5:sent on hook`,
		`wh:w5:delivered on hook`,
		`poll:p6:undelivered on hook`,
		`sms:s7:maybe:in_doubt on hook`,
		`sms:s7:maybe:sent on hook`,
		`sms:s8:cancelled on hook`,
	} {
		if !slices.ContainsFunc(distributed, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("distributed mode: no notification %q in\n%s", want, strings.Join(distributed, "\n"))
		}
	}
	if len(distributed) != 12 {
		t.Errorf("distributed mode: %d notifications, want 12:\n%s", len(distributed), strings.Join(distributed, "\n"))
	}
	for _, n := range distributed {
		if !strings.Contains(n, " same trace true: ") {
			t.Errorf("distributed mode: a notification not in its source's trace: %s", n)
		}
	}
	checkCitusCounts(t, pool, "after the notifications")
}
