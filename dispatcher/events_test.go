package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
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

// eventRig is a registered channel "sms" (and "hook", its producer's webhook
// channel) with a dispatcher that is not started: only RecordEvent runs.
type eventRig struct {
	pool *pgxpool.Pool
	d    *dispatcher.Dispatcher
}

func newEventRig(t *testing.T, notify *dispatcher.Notify) eventRig {
	t.Helper()
	pool := pgtest.New(t)
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "x", nil }}
	chans := []dispatcher.Channel{
		{Name: "sms", Kind: "twilio", Provider: p, Policy: policy.Default("twilio"), Notify: notify},
		{Name: "hook", Kind: "webhook", Provider: p, Policy: policy.Default("webhook")},
	}
	if err := dispatcher.Register(context.Background(), pool, chans); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: chans})
	if err != nil {
		t.Fatal(err)
	}
	return eventRig{pool: pool, d: d}
}

// insert adds an intent of channel sms in status, with ref and delivery ("" = NULL).
func (r eventRig) insert(t *testing.T, event, status, ref, delivery string) int64 {
	t.Helper()
	return fixture.Intent(t, r.pool, fixture.Channel("sms"), fixture.Event(event), fixture.Status(status), fixture.Attempts(1),
		fixture.Payload(`{"to":"+15005550006","body":"hi"}`), fixture.ProviderRef(ref), fixture.Delivery(delivery, "")).ID
}

type intentState struct{ Status, Ref, Delivery, Detail string }

func (r eventRig) state(t *testing.T, id int64) intentState {
	t.Helper()
	var s intentState
	err := r.pool.QueryRow(context.Background(), `SELECT status, coalesce(provider_ref, ''), coalesce(delivery, ''), coalesce(delivery_detail, '')
		FROM effectd.intents WHERE id = $1`, id).Scan(&s.Status, &s.Ref, &s.Delivery, &s.Detail)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// twilioEvent is a status callback of message sid, whose callback URL effectd
// gave intent id and the producer's event ("" = a URL without it).
func twilioEvent(id int64, event, sid, status string, delivery statemachine.Delivery, code string) dispatcher.ProviderEvent {
	return dispatcher.ProviderEvent{
		Provider: "twilio", EventID: sid + ":" + status, Channel: "sms", IntentID: id, IntentEventID: event, ObjectRef: sid,
		Type: status, Status: status, Delivery: delivery, Detail: dispatcher.DetailOf(status, code),
		Payload: json.RawMessage(fmt.Sprintf(`{"MessageSid":%q,"MessageStatus":%q}`, sid, status)),
	}
}

func (r eventRig) record(t *testing.T, ev dispatcher.ProviderEvent) dispatcher.EventResult {
	t.Helper()
	res, err := r.d.RecordEvent(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRecordEventForwardOnly: statuses move the delivery forward; a repeat
// is a duplicate, and a late or older status changes nothing.
func TestRecordEventForwardOnly(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "e1", "SENT", "SM1", "accepted")

	if res := r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, "")); res.Outcome != dispatcher.EventApplied || res.To != statemachine.Delivered {
		t.Fatalf("delivered: %+v", res)
	}
	if res := r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, "")); !res.Duplicate {
		t.Fatalf("repeat: %+v, want duplicate", res)
	}
	if res := r.record(t, twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, "")); res.Outcome != dispatcher.EventUnchanged {
		t.Fatalf("late sent: %+v, want unchanged", res)
	}
	if res := r.record(t, twilioEvent(id, "e1", "SM1", "undelivered", statemachine.Undelivered, "30003")); res.Outcome != dispatcher.EventUnchanged {
		t.Fatalf("undelivered after delivered, no reversal: %+v, want unchanged", res)
	}
	if s := r.state(t, id); s.Delivery != "delivered" || s.Detail != "delivered" {
		t.Fatalf("intent: %+v", s)
	}
	var n int
	r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.provider_events WHERE intent_id = $1`, id).Scan(&n)
	if n != 3 {
		t.Fatalf("stored events = %d, want 3 (the repeat is not stored twice)", n)
	}
}

// TestRecordEventUndelivered keeps the provider's error code in the detail.
func TestRecordEventUndelivered(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "e1", "SENT", "SM1", "accepted")
	r.record(t, twilioEvent(id, "e1", "SM1", "undelivered", statemachine.Undelivered, "30003"))
	if s := r.state(t, id); s.Delivery != "undelivered" || s.Detail != "undelivered 30003" {
		t.Fatalf("intent: %+v", s)
	}
	// Never back.
	r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, ""))
	if s := r.state(t, id); s.Delivery != "undelivered" {
		t.Fatalf("after a late delivered: %+v", s)
	}
}

// TestRecordEventReversal: a Stripe refund that fails after succeeding.
func TestRecordEventReversal(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "e1", "SENT", "re_1", "accepted")
	ev := func(evt, status string, d statemachine.Delivery, reversal bool) dispatcher.ProviderEvent {
		return dispatcher.ProviderEvent{Provider: "stripe", EventID: evt, Channel: "sms", IntentID: id, IntentEventID: "e1", ObjectRef: "re_1",
			Type: "refund.updated", Status: status, Delivery: d, Reversal: reversal, Detail: status}
	}
	r.record(t, ev("evt_1", "succeeded", statemachine.Delivered, false))
	if s := r.state(t, id); s.Delivery != "delivered" {
		t.Fatalf("after succeeded: %+v", s)
	}
	if res := r.record(t, ev("evt_2", "failed", statemachine.Undelivered, true)); res.From != statemachine.Delivered || res.To != statemachine.Undelivered {
		t.Fatalf("failed: %+v", res)
	}
	if s := r.state(t, id); s.Delivery != "undelivered" || s.Detail != "failed" {
		t.Fatalf("after failed: %+v", s)
	}
}

// TestRecordEventSettlesInDoubt: an event about a SENDING or IN_DOUBT intent
// settles it SENT with the event's reference, recorded as a callback attempt;
// the late worker's completion is then fenced out.
func TestRecordEventSettlesInDoubt(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	for _, status := range []string{"SENDING", "IN_DOUBT"} {
		id := r.insert(t, "e-"+status, status, "", "")
		res := r.record(t, twilioEvent(id, "e-"+status, "SM-"+status, "sent", statemachine.Accepted, ""))
		if res.Outcome != dispatcher.EventSettled {
			t.Fatalf("%s: %+v, want settled", status, res)
		}
		if s := r.state(t, id); s.Status != "SENT" || s.Ref != "SM-"+status || s.Delivery != "accepted" {
			t.Fatalf("%s: intent %+v", status, s)
		}
		var kind, outcome string
		r.pool.QueryRow(context.Background(), `SELECT kind, outcome FROM effectd.attempts WHERE intent_id = $1`, id).Scan(&kind, &outcome)
		if kind != "callback" {
			t.Fatalf("%s: attempt kind %q (%s), want callback", status, kind, outcome)
		}
	}
}

// TestRecordEventOrphansAndOtherRefs: an event matching no intent is kept
// with no intent; one about another object than the intent's changes nothing.
func TestRecordEventOrphansAndOtherRefs(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "e1", "SENT", "SM1", "accepted")
	if res := r.record(t, twilioEvent(id+1000, "e1", "SM9", "delivered", statemachine.Delivered, "")); res.Outcome != dispatcher.EventOrphan || res.IntentID != 0 {
		t.Fatalf("unknown intent: %+v, want orphan", res)
	}
	if res := r.record(t, twilioEvent(0, "", "SM8", "delivered", statemachine.Delivered, "")); res.Outcome != dispatcher.EventOrphan {
		t.Fatalf("no intent id, unknown ref: %+v, want orphan", res)
	}
	if res := r.record(t, twilioEvent(id, "e1", "SM2", "delivered", statemachine.Delivered, "")); res.Outcome != dispatcher.EventOtherRef {
		t.Fatalf("another message: %+v, want other_ref", res)
	}
	if res := r.record(t, twilioEvent(0, "", "SM1", "delivered", statemachine.Delivered, "")); res.Outcome != dispatcher.EventApplied || res.IntentID != id {
		t.Fatalf("by reference: %+v, want applied to %d", res, id)
	}
	var orphans int
	r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.provider_events WHERE intent_id IS NULL AND outcome = 'orphan'`).Scan(&orphans)
	if orphans != 2 {
		t.Fatalf("orphans stored = %d, want 2", orphans)
	}
	if n := dispatcher.Orphans(r.d, "sms"); n != 2 {
		t.Fatalf("effectd_orphan_events_total = %v, want 2", n)
	}
}

// TestRecordEventDedupePerChannel: an event is stored once per channel. A
// validly signed callback first posted to the wrong channel stays an orphan
// there and still applies when it reaches its own channel; a repeat on either
// channel is a duplicate. A Stripe event, which Stripe sends to every endpoint
// of the account (one per channel), applies on its channel whichever came first.
func TestRecordEventDedupePerChannel(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "e1", "SENT", "SM1", "accepted")
	wrong := twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, "")
	wrong.Channel = "hook"
	if res := r.record(t, wrong); res.Outcome != dispatcher.EventOrphan {
		t.Fatalf("on the wrong channel: %+v, want orphan", res)
	}
	if res := r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, "")); res.Duplicate || res.Outcome != dispatcher.EventApplied {
		t.Fatalf("on its own channel after the wrong one: %+v, want applied", res)
	}
	if s := r.state(t, id); s.Delivery != "delivered" {
		t.Fatalf("intent: %+v, want delivered", s)
	}
	for _, ch := range []string{"sms", "hook"} {
		again := twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, "")
		again.Channel = ch
		if res := r.record(t, again); !res.Duplicate {
			t.Errorf("repeat on %s: %+v, want duplicate", ch, res)
		}
	}

	refund := r.insert(t, "e2", "SENT", "re_1", "accepted")
	stripe := func(channel string) dispatcher.ProviderEvent {
		return dispatcher.ProviderEvent{Provider: "stripe", EventID: "evt_1", Channel: channel, ObjectRef: "re_1",
			Type: "refund.updated", Status: "succeeded", Delivery: statemachine.Delivered, Detail: "succeeded"}
	}
	if res := r.record(t, stripe("hook")); res.Outcome != dispatcher.EventOrphan {
		t.Fatalf("stripe event on another channel's endpoint: %+v, want orphan", res)
	}
	if res := r.record(t, stripe("sms")); res.Duplicate || res.IntentID != refund || res.Outcome != dispatcher.EventApplied {
		t.Fatalf("stripe event on its channel's endpoint: %+v, want applied to %d", res, refund)
	}
	var n int
	r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.provider_events`).Scan(&n)
	if n != 4 {
		t.Errorf("stored events = %d, want 4 (each event once per channel)", n)
	}
}

// TestNotifyOutcomes: each listed outcome is enqueued once on the notify
// channel, in the transaction that reaches it; unlisted outcomes are not.
func TestNotifyOutcomes(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"sent", "delivered", "undelivered", "cancelled"}})
	ctx := context.Background()
	id := r.insert(t, "e1", "SENDING", "", "")
	r.record(t, twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, ""))            // settles: SENT
	r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, ""))      // delivered
	r.record(t, twilioEvent(id, "e1", "SM1", "undelivered", statemachine.Undelivered, "1")) // refused: no change, no notice
	failed := r.insert(t, "e2", "SENDING", "", "")
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'FAILED' WHERE id = $1`, failed); err != nil {
		t.Fatal(err) // failed is not listed
	}

	rows, err := r.pool.Query(ctx, `SELECT event_id, payload, coalesce(ordering_key, '') FROM effectd.intents WHERE channel = 'hook' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var ev, key string
		var p struct {
			Type   string `json:"type"`
			Intent struct {
				ID          int64   `json:"id"`
				EventID     string  `json:"event_id"`
				Status      string  `json:"status"`
				Delivery    *string `json:"delivery"`
				ProviderRef *string `json:"provider_ref"`
			} `json:"intent"`
		}
		var raw []byte
		if err := rows.Scan(&ev, &raw, &key); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Intent.ID != id || p.Intent.EventID != "e1" || key != "sms:e1" || p.Intent.ProviderRef == nil || *p.Intent.ProviderRef != "SM1" {
			t.Errorf("notification %s: %s (ordering key %q)", ev, raw, key)
		}
		got = append(got, ev+" "+p.Type)
	}
	if want := "[sms:e1:sent effect.sent sms:e1:delivered effect.delivered]"; fmt.Sprint(got) != want {
		t.Fatalf("notifications = %v, want %s", got, want)
	}
}

// TestNotifyOnceWhenReachedAgain: an outcome an intent reaches a second time
// (FAILED, requeued by an operator, FAILED again) is told once, under the same
// event id, so its producer hears it once.
func TestNotifyOnceWhenReachedAgain(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"failed"}})
	ctx := context.Background()
	id := r.insert(t, "e1", "SENDING", "", "")
	for _, status := range []string{"FAILED", "PENDING", "SENDING", "FAILED"} { // each in its own transaction
		if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = $2 WHERE id = $1`, id, status); err != nil {
			t.Fatal(err)
		}
	}
	rows, _ := r.pool.Query(ctx, `SELECT event_id FROM effectd.intents WHERE channel = 'hook' ORDER BY id`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "[sms:e1:failed]"; fmt.Sprint(got) != want {
		t.Fatalf("notifications = %v, want %s", got, want)
	}
}

// TestNotifyNeverBlocksTheChange: a notification that cannot be enqueued
// (its channel is gone) leaves the change it reports in place.
func TestNotifyNeverBlocksTheChange(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"sent"}})
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.channels SET notify = '{"channel":"gone","on":["sent"]}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	id := r.insert(t, "e1", "SENDING", "", "")
	if res := r.record(t, twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, "")); res.Outcome != dispatcher.EventSettled {
		t.Fatalf("%+v", res)
	}
	if s := r.state(t, id); s.Status != "SENT" {
		t.Fatalf("intent: %+v", s)
	}
}

// TestSentDelivery: a webhook answered 2xx is delivered at once; a Twilio
// message accepted, until its events say more.
func TestSentDelivery(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"webhook", "twilio"} {
		p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
		r := start(t, kind, p, fastPolicy(kind))
		r.enqueue(t, "x")
		r.waitStatus(t, "x", "SENT")
		var delivery string
		var at *time.Time
		r.pool.QueryRow(context.Background(), `SELECT coalesce(delivery, ''), delivery_at FROM effectd.intents WHERE event_id = 'x'`).Scan(&delivery, &at)
		want := map[string]string{"webhook": "delivered", "twilio": "accepted"}[kind]
		if delivery != want || at == nil {
			t.Errorf("%s: delivery %q at %v, want %q with a time", kind, delivery, at, want)
		}
	}
}

// TestRecordEventRaces: many intents each get their statuses several times
// over, concurrently and in random order. Each event is stored once, and every
// intent ends at the delivery its most advanced status says, whatever the order.
func TestRecordEventRaces(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"sent", "delivered", "undelivered"}})
	const intents = 20
	type report struct {
		id     int64
		event  string
		status string
		d      statemachine.Delivery
		code   string
	}
	var reports []report
	ids := make([]int64, intents)
	for i := range ids {
		status := "SENT"
		if i%3 == 0 {
			status = "SENDING" // the callback arrives before the worker's completion
		}
		ids[i] = r.insert(t, fmt.Sprint("e", i), status, "", "")
		if status == "SENT" { // sent by the worker, which stored the message's SID
			if _, err := r.pool.Exec(context.Background(), `UPDATE effectd.intents SET provider_ref = 'SM' || id, delivery = 'accepted' WHERE id = $1`, ids[i]); err != nil {
				t.Fatal(err)
			}
		}
		final, d, code := "delivered", statemachine.Delivered, ""
		if i%2 == 1 {
			final, d, code = "undelivered", statemachine.Undelivered, "30003"
		}
		for copies := 0; copies < 3; copies++ {
			event := fmt.Sprint("e", i)
			reports = append(reports, report{ids[i], event, "queued", statemachine.Accepted, ""}, report{ids[i], event, "sent", statemachine.Accepted, ""},
				report{ids[i], event, final, d, code})
		}
	}
	rand.Shuffle(len(reports), func(i, j int) { reports[i], reports[j] = reports[j], reports[i] })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, rep := range reports {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sid := fmt.Sprint("SM", rep.id)
			if _, err := r.d.RecordEvent(context.Background(), twilioEvent(rep.id, rep.event, sid, rep.status, rep.d, rep.code)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ctx := context.Background()
	for i, id := range ids {
		s := r.state(t, id)
		want := map[bool]string{false: "delivered", true: "undelivered"}[i%2 == 1]
		if s.Status != "SENT" || s.Delivery != want || s.Ref != fmt.Sprint("SM", id) {
			t.Errorf("intent %d: %+v, want SENT %s", id, s, want)
		}
		var stored int
		r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.provider_events WHERE intent_id = $1`, id).Scan(&stored)
		if stored != 3 {
			t.Errorf("intent %d: %d events stored, want 3 (each status once)", id, stored)
		}
	}
	// The producer is told each final delivery once, and sent once for the
	// intents the events settled.
	var notices, finals int
	r.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE payload->>'type' IN ('effect.delivered', 'effect.undelivered'))
		FROM effectd.intents WHERE channel = 'hook'`).Scan(&notices, &finals)
	if settled := (intents + 2) / 3; finals != intents || notices != intents+settled {
		t.Errorf("notices = %d (%d final), want %d (%d final)", notices, finals, intents+settled, intents)
	}
}
