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
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// deliveryRig is a database with channels "sms" (twilio) and "pay" (stripe)
// and a dispatcher that is not started: only RecordEvent runs. buckets > 0:
// the distributed mode on the Citus cluster, intents inserted with a bucket.
type deliveryRig struct {
	pool    *pgxpool.Pool
	d       *dispatcher.Dispatcher
	buckets int
}

func newDeliveryRig(t *testing.T, buckets int) deliveryRig {
	t.Helper()
	var pool *pgxpool.Pool
	if buckets > 0 {
		pool = citusPool(t, buckets)
	} else {
		pool = pgtest.New(t)
	}
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "x", nil }}
	chans := []dispatcher.Channel{
		{Name: "sms", Kind: "twilio", Provider: p, Policy: policy.Default("twilio")},
		{Name: "pay", Kind: "stripe", Provider: p, Policy: policy.Default("stripe")},
	}
	if err := dispatcher.Register(context.Background(), pool, chans); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: chans, Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	return deliveryRig{pool: pool, d: d, buckets: buckets}
}

// insert adds an intent of channel in status with ref and delivery ("" =
// NULL), on bucket in the distributed mode.
func (r deliveryRig) insert(t *testing.T, bucket int, channel, event, status, ref, delivery string) int64 {
	t.Helper()
	// (the factory counts a settled intent in the distributed mode as the
	// statement that settled it would have)
	return fixture.Intent(t, r.pool, fixture.Bucket(int64(bucket)), fixture.Event(event), fixture.Channel(channel),
		fixture.Status(status), fixture.Attempts(1), fixture.Payload(`{"to":"+15005550006","body":"hi"}`),
		fixture.ProviderRef(ref), fixture.Delivery(delivery, "")).ID
}

// deliveryScenario records provider events about intents of several buckets
// on r and returns what each event did, then each intent's state, attempt
// trail and events, with intents named by their event id (the ids differ
// between databases).
func deliveryScenario(t *testing.T, r deliveryRig) []string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]int64{
		"a": r.insert(t, 5, "sms", "a", "SENT", "SM1", "accepted"), // a Twilio message, sent
		"b": r.insert(t, 3, "sms", "b", "IN_DOUBT", "", ""),        // a Twilio call that timed out
		"c": r.insert(t, 6, "pay", "c", "SENDING", "", ""),         // a Stripe call still in flight
		"d": r.insert(t, 7, "pay", "d", "SENT", "re_4", "accepted"),
	}
	name := map[int64]string{0: "-"}
	for k, v := range ids {
		name[v] = k
	}
	// the producer's event id effectd stamped on the object with intent id id
	stamped := func(id int64) string {
		if id == 0 {
			return ""
		}
		return name[id]
	}
	stripe := func(id int64, evt, ref string, delivery statemachine.Delivery) dispatcher.ProviderEvent {
		return dispatcher.ProviderEvent{Provider: "stripe", EventID: evt, Channel: "pay", IntentID: id, IntentEventID: stamped(id), ObjectRef: ref,
			Type: "refund.updated", Status: string(delivery), Delivery: delivery, Detail: "refund " + string(delivery),
			Payload: json.RawMessage(`{"id":"` + evt + `"}`)}
	}
	sms := func(id int64, sid, status string, delivery statemachine.Delivery, code string) dispatcher.ProviderEvent {
		ev := twilioEvent(id, stamped(id), sid, status, delivery, code)
		ev.Channel = "sms"
		return ev
	}
	events := []dispatcher.ProviderEvent{
		sms(ids["a"], "SM1", "delivered", statemachine.Delivered, ""),      // applied
		sms(ids["a"], "SM1", "delivered", statemachine.Delivered, ""),      // a repeat: recorded once
		sms(ids["a"], "SM7", "delivered", statemachine.Delivered, ""),      // another message: other_ref
		sms(ids["b"], "SM2", "sent", statemachine.Accepted, ""),            // settles the in-doubt call
		sms(0, "SM2", "undelivered", statemachine.Undelivered, "30003"),    // by reference alone
		sms(ids["a"]+1000, "SM9", "delivered", statemachine.Delivered, ""), // no such intent: orphan
		sms(0, "SM8", "delivered", statemachine.Delivered, ""),             // no such reference: orphan
		stripe(ids["c"], "evt_1", "re_3", statemachine.Delivered),          // settles the call in flight
		stripe(0, "evt_2", "re_4", statemachine.Delivered),                 // by reference alone
		stripe(0, "evt_2", "re_4", statemachine.Delivered),                 // a repeat
		stripe(ids["a"], "evt_3", "re_5", statemachine.Delivered),          // an sms intent's id on pay: orphan
	}
	var out []string
	for _, ev := range events {
		res, err := r.d.RecordEvent(ctx, ev)
		if err != nil {
			t.Fatalf("RecordEvent(%s): %v", ev.EventID, err)
		}
		out = append(out, fmt.Sprintf("event %s: duplicate %v, intent %s, %s, %s → %s", ev.EventID, res.Duplicate, name[res.IntentID], res.Outcome, res.From, res.To))
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		var s string
		if err := r.pool.QueryRow(ctx, `SELECT concat_ws(' ', status, provider_ref, delivery, delivery_detail, delivery_at IS NOT NULL)
			FROM effectd.intents WHERE id = $1`, ids[k]).Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, "intent "+k+": "+s)
		rows, _ := r.pool.Query(ctx, `SELECT concat_ws(' ', attempt, kind, outcome, error, provider_ref, finished_at IS NOT NULL)
			FROM effectd.attempts WHERE intent_id = $1 ORDER BY id`, ids[k])
		trail, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "  attempts: "+strings.Join(trail, "; "))
	}
	rows, _ := r.pool.Query(ctx, `SELECT event_id, channel, intent_id, outcome FROM effectd.provider_events ORDER BY id`)
	stored, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var ev, ch, outcome string
		var id *int64
		err := row.Scan(&ev, &ch, &id, &outcome)
		if id == nil {
			return fmt.Sprintf("stored %s on %s: no intent, %s", ev, ch, outcome), err
		}
		return fmt.Sprintf("stored %s on %s: intent %s, %s", ev, ch, name[*id], outcome), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, stored...)
}

// TestCitusProviderEvents: Twilio status callbacks and Stripe events about
// intents on non-zero buckets do in the distributed mode what they do on one
// PostgreSQL: the same outcome for each event (applied, settled by the event,
// other object, orphan, a repeat recorded once), the same intents' delivery
// and the same attempt trails and stored events. Every attempt row the
// events wrote is on its intent's bucket, and the counts by delivery follow them.
func TestCitusProviderEvents(t *testing.T) {
	single := deliveryScenario(t, newDeliveryRig(t, 0))
	r := newDeliveryRig(t, 8)
	distributed := deliveryScenario(t, r)
	if !slices.Equal(single, distributed) {
		t.Errorf("distributed mode differs from one PostgreSQL:\n--- one PostgreSQL\n%s\n--- distributed\n%s",
			strings.Join(single, "\n"), strings.Join(distributed, "\n"))
	}
	for _, want := range []string{
		"event SM1:delivered: duplicate false, intent a, applied, accepted → delivered",
		"event SM1:delivered: duplicate true, intent -, ,  → ",
		"event SM2:sent: duplicate false, intent b, settled,  → accepted",
		"event SM2:undelivered: duplicate false, intent b, applied, accepted → undelivered",
		"event SM9:delivered: duplicate false, intent -, orphan,  → ",
		"event evt_1: duplicate false, intent c, settled,  → delivered",
		"event evt_2: duplicate false, intent d, applied, accepted → delivered",
		"intent b: SENT SM2 undelivered undelivered 30003 t",
		"  attempts: 1 callback settled by a twilio event: sent SM2 t",
		"  attempts: 1 callback settled by a stripe event: refund.updated re_3 t",
	} {
		if !slices.Contains(distributed, want) {
			t.Errorf("distributed mode: no %q in\n%s", want, strings.Join(distributed, "\n"))
		}
	}
	var misplaced, callbacks int
	if err := r.pool.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE i.id IS NULL), count(*) FILTER (WHERE a.bucket IN (3, 6))
FROM effectd.attempts a LEFT JOIN effectd.intents i ON i.bucket = a.bucket AND i.id = a.intent_id`).Scan(&misplaced, &callbacks); err != nil {
		t.Fatal(err)
	}
	if misplaced != 0 || callbacks != 2 {
		t.Errorf("attempt rows: %d not on their intent's bucket, %d on buckets 3 and 6; want 0 and 2", misplaced, callbacks)
	}
	checkCitusCounts(t, r.pool, "after the provider events")
}

// TestCitusDeliveryPoll: in the distributed mode, a poll-tracked channel's
// delivery is polled by the owner of the intent's bucket, one single-shard
// statement per bucket, at the listed delays until it is final, as on one
// PostgreSQL (TestDeliveryPoll); the poll attempts are on the intent's bucket,
// and the counts by delivery follow the polls.
func TestCitusDeliveryPoll(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &polled{polls: map[string]int{}, statuses: []string{"sent", "delivered"}}
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond), policy.Duration(2 * time.Millisecond), policy.Duration(3 * time.Millisecond)}
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}},
		Buckets: buckets, DeliveryPollInterval: time.Hour})
	eventually(t, 20*time.Second, "the dispatcher serves every bucket", func() bool {
		return len(dispatcher.OwnedBuckets(d)) == buckets
	})
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e1', channel => 'c', payload => '{"to":"+15005550006","body":"hi"}', bucket => 5)`); err != nil {
		t.Fatal(err)
	}
	r := rig{pool: pool, d: d}
	r.waitStatus(t, "e1", "SENT")
	for i, want := range []string{"accepted", "delivered"} {
		eventually(t, 10*time.Second, "poll "+want, func() bool {
			n, err := dispatcher.PollDeliveries(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		var delivery string
		pool.QueryRow(ctx, `SELECT coalesce(delivery, '') FROM effectd.intents WHERE event_id = 'e1'`).Scan(&delivery)
		if delivery != want || p.count("SM1") != i+1 {
			t.Fatalf("after poll %d: delivery %q after %d polls, want %q", i+1, delivery, p.count("SM1"), want)
		}
	}
	var past bool
	eventually(t, 10*time.Second, "the last delay passed", func() bool {
		pool.QueryRow(ctx, `SELECT now() > delivery_at + interval '3 ms' FROM effectd.intents WHERE event_id = 'e1'`).Scan(&past)
		return past
	})
	if n, err := dispatcher.PollDeliveries(ctx, d); err != nil || n != 0 || p.count("SM1") != 2 {
		t.Errorf("after delivered: polled %d (%v), %d polls in all; want no more", n, err, p.count("SM1"))
	}
	if x := r.row(t, "e1"); len(x.Outcomes) != 3 || x.Outcomes[1] != "poll:poll: sent → accepted" || x.Outcomes[2] != "poll:poll: delivered → delivered" {
		t.Errorf("attempts: %v", x.Outcomes)
	}
	var polls int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts WHERE kind = 'poll' AND bucket = 5`).Scan(&polls); err != nil || polls != 2 {
		t.Errorf("poll attempts on bucket 5: %d, %v; want 2", polls, err)
	}
	checkCitusCounts(t, pool, "after the polls")
}

// TestCitusDeliveryPollOwnedBuckets: with two instances dividing the
// buckets, each polls the due deliveries of the buckets it holds and no
// other: every intent is polled once, by its bucket's owner.
func TestCitusDeliveryPollOwnedBuckets(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond)}
	start := func(p *polled) *dispatcher.Dispatcher {
		return run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}},
			Buckets: buckets, BucketLease: 2 * time.Second, DeliveryPollInterval: time.Hour})
	}
	pa := &polled{polls: map[string]int{}, statuses: []string{"delivered"}}
	pb := &polled{polls: map[string]int{}, statuses: []string{"delivered"}}
	a, b := start(pa), start(pb)
	eventually(t, 20*time.Second, "each instance serves half the buckets", func() bool {
		return len(dispatcher.OwnedBuckets(a)) == buckets/2 && len(dispatcher.OwnedBuckets(b)) == buckets/2
	})
	fixture.Intents(t, pool, buckets, func(n int) []fixture.IntentOption {
		g := n - 1
		return []fixture.IntentOption{fixture.Bucket(int64(g)), fixture.Event(fmt.Sprintf("e%d", g)), fixture.Channel("c"),
			fixture.Status("SENT"), fixture.ProviderRef(fmt.Sprintf("SM-%d", g)), fixture.Delivery("accepted", ""),
			fixture.DeliveredAt(time.Now().Add(-time.Minute))}
	})
	for _, x := range []struct {
		name string
		d    *dispatcher.Dispatcher
		p    *polled
	}{{"a", a, pa}, {"b", b, pb}} {
		owned := dispatcher.OwnedBuckets(x.d)
		n, err := dispatcher.PollDeliveries(ctx, x.d)
		if err != nil || n != len(owned) {
			t.Fatalf("%s polled %d (%v); want %d, one per bucket it holds (%v)", x.name, n, err, len(owned), owned)
		}
		for bucket := range buckets {
			want := 0
			if slices.Contains(owned, bucket) {
				want = 1
			}
			if got := x.p.count(fmt.Sprintf("SM-%d", bucket)); got != want {
				t.Errorf("%s (buckets %v) polled bucket %d's intent %d times; want %d", x.name, owned, bucket, got, want)
			}
		}
	}
	var delivered int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE delivery = 'delivered'`).Scan(&delivered); err != nil || delivered != buckets {
		t.Errorf("delivered: %d, %v; want %d", delivered, err, buckets)
	}
}
