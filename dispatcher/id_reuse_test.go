package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// An asynchronous failover loses the newest commits: an intent's enqueue, its
// attempts, and the sequence values they used. The promoted primary hands the
// lost intent's id to the next intent enqueued, while the provider still holds
// the lost intent's object, stamped with that id. The tests below deliver what
// the provider says of the lost intent's object to the intent that has its id
// now, and require that intent untouched (docs/guarantees.md, "Identities").

// reuseID stands for such a failover: intent id (and its attempts) is gone,
// and another intent of channel, of the producer's event event, has the id
// now, in status with reference ref and delivery ("" = NULL).
func reuseID(t *testing.T, pool *pgxpool.Pool, id int64, channel, event, status, ref, delivery string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []string{
		`DELETE FROM effectd.attempts WHERE intent_id = $1`,
		`DELETE FROM effectd.intents WHERE id = $1`,
	} {
		if _, err := pool.Exec(ctx, s, id); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Intent(t, pool, fixture.ID(id), fixture.Event(event), fixture.Channel(channel), fixture.Status(status),
		fixture.Attempts(1), fixture.Payload(`{"to":"+15005550006","body":"hi"}`), fixture.ProviderRef(ref),
		fixture.Delivery(delivery, ""))
}

// untouched is the state and trail of intent id, to compare before and after.
func untouched(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	ctx := context.Background()
	var s string
	var attempts int
	if err := pool.QueryRow(ctx, `
		SELECT concat_ws(' ', event_id, status, attempts, provider_ref, delivery, delivery_detail, delivery_at, updated_at)
		FROM effectd.intents WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts WHERE intent_id = $1`, id).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s, %d attempts", s, attempts)
}

// TestRecordEventAfterIDReuse: a status callback or a Stripe event about the
// lost intent's object names the intent by the id and the producer's event
// id effectd stamped on it. The intent that has the id now is of another
// event: the event is an orphan, and that intent is neither settled SENT with
// the other object's reference nor has its delivery moved. An object that
// carries the id alone (a callback URL made before the event id was added)
// matches only the intent already holding its reference.
func TestRecordEventAfterIDReuse(t *testing.T) {
	t.Parallel()
	stripeEvent := func(id int64, event, evt, ref string, d statemachine.Delivery) dispatcher.ProviderEvent {
		return dispatcher.ProviderEvent{Provider: "stripe", EventID: evt, Channel: "sms", IntentID: id, IntentEventID: event,
			ObjectRef: ref, Type: "refund.updated", Status: string(d), Delivery: d, Detail: string(d), Payload: json.RawMessage(`{}`)}
	}
	for _, tc := range []struct {
		name           string
		status, ref    string // the new intent's
		delivery       string
		event          func(id int64) dispatcher.ProviderEvent // about the lost intent's object
		want           string                                  // the event's outcome
		wantNewChanged bool
	}{
		{"callback settles nothing in doubt", "IN_DOUBT", "", "",
			func(id int64) dispatcher.ProviderEvent {
				return twilioEvent(id, "lost", "SM-lost", "delivered", statemachine.Delivered, "")
			}, dispatcher.EventOrphan, false},
		{"callback settles nothing in flight", "SENDING", "", "",
			func(id int64) dispatcher.ProviderEvent {
				return twilioEvent(id, "lost", "SM-lost", "sent", statemachine.Accepted, "")
			}, dispatcher.EventOrphan, false},
		{"stripe event settles nothing in doubt", "IN_DOUBT", "", "",
			func(id int64) dispatcher.ProviderEvent {
				return stripeEvent(id, "lost", "evt_1", "re_lost", statemachine.Delivered)
			}, dispatcher.EventOrphan, false},
		{"stripe event moves no delivery", "SENT", "", "accepted",
			func(id int64) dispatcher.ProviderEvent {
				return stripeEvent(id, "lost", "evt_2", "re_lost", statemachine.Undelivered)
			}, dispatcher.EventOrphan, false},
		{"callback with the id alone settles nothing", "IN_DOUBT", "", "",
			func(id int64) dispatcher.ProviderEvent {
				return twilioEvent(id, "", "SM-lost", "delivered", statemachine.Delivered, "")
			}, dispatcher.EventOrphan, false},
		{"callback with the id alone still applies to the intent holding its sid", "SENT", "SM-new", "accepted",
			func(id int64) dispatcher.ProviderEvent {
				return twilioEvent(id, "", "SM-new", "delivered", statemachine.Delivered, "")
			}, dispatcher.EventApplied, true},
		{"callback of the new intent's own message applies", "IN_DOUBT", "", "",
			func(id int64) dispatcher.ProviderEvent {
				return twilioEvent(id, "new", "SM-new", "delivered", statemachine.Delivered, "")
			}, dispatcher.EventSettled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newEventRig(t, nil)
			id := r.insert(t, "lost", "SENDING", "", "")
			reuseID(t, r.pool, id, "sms", "new", tc.status, tc.ref, tc.delivery)
			before := untouched(t, r.pool, id)
			res := r.record(t, tc.event(id))
			if res.Outcome != tc.want {
				t.Errorf("outcome %+v; want %s", res, tc.want)
			}
			if after := untouched(t, r.pool, id); (after != before) != tc.wantNewChanged {
				t.Errorf("the intent that has the id now: %q → %q; want changed %v", before, after, tc.wantNewChanged)
			}
		})
	}
}

// reusedPoll sends at once and answers a delivery poll; while the poll is
// at the provider, the intent polled is lost to a failover and its id
// handed to another intent (reuse).
type reusedPoll struct {
	mu    sync.Mutex
	reuse func()
	polls int
}

func (p *reusedPoll) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	return "SM-lost", nil
}

func (p *reusedPoll) Poll(context.Context, string) (status, delivery, detail string, reversal bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polls++; p.polls == 1 && p.reuse != nil {
		p.reuse()
	}
	return "delivered", "delivered", "delivered", false, nil
}

// TestDeliveryPollAfterIDReuse: a delivery poll is listed, then asked of the
// provider, then recorded. When the intent polled is lost meanwhile and its
// id handed to another intent, the answer about the lost intent's message
// moves no delivery of the intent that has the id now and leaves no poll
// attempt on it.
func TestDeliveryPollAfterIDReuse(t *testing.T) {
	t.Parallel()
	p := &reusedPoll{}
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond)}
	pool := pgtest.New(t)
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}},
		DeliveryPollInterval: time.Hour})
	r := rig{pool: pool, d: d}
	r.enqueue(t, "lost")
	r.waitStatus(t, "lost", "SENT")
	var id int64
	if err := pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id = 'lost'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var before string
	p.mu.Lock()
	p.reuse = func() {
		reuseID(t, pool, id, "c", "new", "SENT", "SM-new", "accepted")
		before = untouched(t, pool, id)
	}
	p.mu.Unlock()
	eventually(t, 10*time.Second, "the poll", func() bool {
		n, err := dispatcher.PollDeliveries(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if after := untouched(t, pool, id); after != before {
		t.Errorf("the intent that has the id now: %q → %q; want it untouched", before, after)
	}
}

// TestOperateAfterIDReuse: an operator's form shows an intent, and the
// operation it sends names the intent by its id and its event id. When the
// intent was lost meanwhile and its id handed to another intent, the
// operation finds no intent (ErrNotFound) and the intent that has the id now
// is untouched; its own event id applies it.
func TestOperateAfterIDReuse(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.insert(t, "lost", "IN_DOUBT", "", "")
	reuseID(t, r.pool, id, "sms", "new", "IN_DOUBT", "", "")
	before := untouched(t, r.pool, id)
	ctx := context.Background()
	op := operator.Operation{IntentID: id, EventID: "lost", Event: statemachine.ResolveSkip, Actor: "alice", Reason: "checked at the provider"}
	if _, _, err := operator.New(r.pool, storeOf(r.pool, effectdtype.SingleNode)).Operate(ctx, op); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("the lost intent's operation: %v; want ErrNotFound", err)
	}
	if after := untouched(t, r.pool, id); after != before {
		t.Fatalf("the intent that has the id now: %q → %q; want it untouched", before, after)
	}
	op.EventID = "new"
	if _, after, err := operator.New(r.pool, storeOf(r.pool, effectdtype.SingleNode)).Operate(ctx, op); err != nil || after.Status != statemachine.Skipped {
		t.Fatalf("its own operation: %s, %v", after.Status, err)
	}
}

// TestBulkAfterIDReuse: a bulk snapshot freezes the intents an operator was
// shown; it is applied minutes later. When one of them was lost meanwhile
// and its id handed to another intent in the same state with the same
// attempts, the apply skips that row (counted as skipped) and the intent
// that has the id now is untouched; the other frozen rows are applied.
func TestBulkAfterIDReuse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action, as, status string
	}{
		{"resolve", "skip", "IN_DOUBT"},
		{"retry", "", "FAILED"},
		{"cancel", "", "PENDING"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			t.Parallel()
			r := newEventRig(t, nil)
			ctx := context.Background()
			id := r.insert(t, "lost", tc.status, "", "")
			r.insert(t, "kept", tc.status, "", "")
			snap, err := operator.New(r.pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "alice", Request: effectdtype.BulkRequest{
				Action: tc.action, As: tc.as, Filter: effectdtype.BulkFilter{Status: tc.status, Channel: "sms"}, Reason: "checked"}})
			if err != nil || snap.Matched != 2 {
				t.Fatalf("freeze: %+v, %v; want 2 matched", snap, err)
			}
			reuseID(t, r.pool, id, "sms", "new", tc.status, "", "")
			before := untouched(t, r.pool, id)
			res, err := operator.New(r.pool, storeOf(r.pool, effectdtype.SingleNode)).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "alice"})
			if err != nil || res.Applied != 1 || res.Skipped != 1 {
				t.Fatalf("apply: %+v, %v; want 1 applied (kept), 1 skipped (the id handed to another intent)", res, err)
			}
			if after := untouched(t, r.pool, id); after != before {
				t.Errorf("the intent that has the id now: %q → %q; want it untouched", before, after)
			}
			var audited int
			if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE bulk_snapshot = $1::uuid AND intent_id = $2`,
				snap.Snapshot, id).Scan(&audited); err != nil || audited != 0 {
				t.Errorf("audit entries of the snapshot for intent %d: %d, %v; want none", id, audited, err)
			}
		})
	}
}
