//go:build citus

package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/statemachine"
)

// TestCitusRecordEventAfterIDReuse is TestRecordEventAfterIDReuse in the
// distributed mode: the lost intent was on bucket 3, the intent that has its
// id now is on bucket 5. What the provider says of the lost intent's object
// (by the intent id and the producer's event id stamped on it, or by the id
// alone) is an orphan, and the intent that has the id now is untouched, its
// counts too.
func TestCitusRecordEventAfterIDReuse(t *testing.T) {
	r := newDeliveryRig(t, 8)
	ctx := context.Background()
	for _, tc := range []struct {
		name                   string
		lost                   string // the lost intent's event
		channel, status, deliv string // the new intent's
		event                  func(id int64) dispatcher.ProviderEvent
	}{
		{"callback", "lost-sms", "sms", "IN_DOUBT", "", func(id int64) dispatcher.ProviderEvent {
			return twilioEvent(id, "lost-sms", "SM-lost", "delivered", statemachine.Delivered, "")
		}},
		{"callback with the id alone", "lost-sms2", "sms", "SENDING", "", func(id int64) dispatcher.ProviderEvent {
			return twilioEvent(id, "", "SM-lost2", "sent", statemachine.Accepted, "")
		}},
		{"stripe event", "lost-pay", "pay", "SENT", "accepted", func(id int64) dispatcher.ProviderEvent {
			return dispatcher.ProviderEvent{Provider: "stripe", EventID: "evt_1", Channel: "pay", IntentID: id, IntentEventID: "lost-pay",
				ObjectRef: "re_lost", Type: "refund.updated", Status: "failed", Delivery: statemachine.Undelivered, Detail: "failed",
				Payload: json.RawMessage(`{}`)}
		}},
	} {
		id := r.insert(t, 3, tc.channel, tc.lost, "SENDING", "", "")
		for _, s := range []string{
			`DELETE FROM effectd.attempts WHERE intent_id = $1`,
			`DELETE FROM effectd.intents WHERE id = $1`,
		} {
			if _, err := r.pool.Exec(ctx, s, id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.pool.Exec(ctx, `
			INSERT INTO effectd.intents (bucket, id, event_id, channel, payload, idempotency_key, status, attempts, delivery, delivery_at, lease_expires_at)
			OVERRIDING SYSTEM VALUE
			VALUES (5, $1, $5, $2, '{"to":"+15005550006","body":"hi"}', $2 || ':' || $5, $3, 1,
			        nullif($4, ''), CASE WHEN $4 <> '' THEN now() END, CASE WHEN $3 = 'SENDING' THEN now() + interval '1 minute' END)`, id, tc.channel, tc.status, tc.deliv, "new-"+tc.lost); err != nil {
			t.Fatal(err)
		}
		if tc.status == "SENT" {
			if _, err := r.pool.Exec(ctx, `
				INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
				SELECT bucket, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), 1
				FROM effectd.intents WHERE bucket = 5 AND id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
		before := untouched(t, r.pool, id)
		res, err := r.d.RecordEvent(ctx, tc.event(id))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Outcome != dispatcher.EventOrphan {
			t.Errorf("%s: %+v; want an orphan", tc.name, res)
		}
		if after := untouched(t, r.pool, id); after != before {
			t.Errorf("%s: the intent that has the id now: %q → %q; want it untouched", tc.name, before, after)
		}
	}
	checkCitusCounts(t, r.pool, "after the lost intents' events")
}
