//go:build citus

package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
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
		citusReuseID(t, r.pool, id, 5, tc.channel, "new-"+tc.lost, tc.status, tc.deliv)
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

// citusReuseID is reuseID in the distributed mode: intent id (and its
// attempts) is gone, and another intent of channel, of the producer's event
// event, has the id now, on bucket, in status with delivery ("" = NULL).
// Both are counted as the statements that settled them would have (no
// trigger counts in the distributed mode).
func citusReuseID(t *testing.T, pool *pgxpool.Pool, id int64, bucket int, channel, event, status, delivery string) {
	t.Helper()
	fixture.DeleteIntent(t, pool, id)
	fixture.Intent(t, pool, fixture.Bucket(int64(bucket)), fixture.ID(id), fixture.Event(event), fixture.Channel(channel),
		fixture.Status(status), fixture.Attempts(1), fixture.Payload(`{"to":"+15005550006","body":"hi"}`),
		fixture.Delivery(delivery, ""))
}

// TestCitusBulkAfterIDReuse is TestBulkAfterIDReuse in the distributed mode:
// two frozen intents of bucket 3 are lost and their ids handed to intents in
// the same state with the same attempts, one on bucket 3 (in the batch of
// the intent kept) and one on bucket 5. The apply changes the intent kept
// alone and counts the two others skipped; the intents that have their ids
// now are untouched, their counts too.
func TestCitusBulkAfterIDReuse(t *testing.T) {
	r := newDeliveryRig(t, 8)
	ctx := context.Background()
	for _, tc := range []struct {
		action, as, status string
	}{
		{"resolve", "skip", "IN_DOUBT"},
		{"retry", "", "FAILED"},
		{"cancel", "", "PENDING"},
	} {
		prefix := tc.action + "-"
		sameBucket := r.insert(t, 3, "sms", prefix+"lost-3", tc.status, "", "")
		otherBucket := r.insert(t, 3, "sms", prefix+"lost-5", tc.status, "", "")
		kept := r.insert(t, 3, "sms", prefix+"kept", tc.status, "", "")
		snap, err := operator.New(r.pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "alice", Request: effectdtype.BulkRequest{
			Action: tc.action, As: tc.as, Filter: effectdtype.BulkFilter{Status: tc.status, Channel: "sms", EventIDPrefix: prefix},
			Reason: "checked"}})
		if err != nil || snap.Matched != 3 {
			t.Fatalf("%s: freeze: %+v, %v; want 3 matched", tc.action, snap, err)
		}
		citusReuseID(t, r.pool, sameBucket, 3, "sms", "new-"+prefix+"3", tc.status, "")
		citusReuseID(t, r.pool, otherBucket, 5, "sms", "new-"+prefix+"5", tc.status, "")
		before := []string{untouched(t, r.pool, sameBucket), untouched(t, r.pool, otherBucket)}
		res, err := operator.New(r.pool, storeOf(r.pool, effectdtype.Citus)).ApplyBulk(ctx, operator.BulkApply{Snapshot: snap.Snapshot, Actor: "alice"})
		if err != nil || res.Applied != 1 || res.Skipped != 2 {
			t.Fatalf("%s: apply: %+v, %v; want 1 applied (kept), 2 skipped (their ids handed to other intents)", tc.action, res, err)
		}
		for i, id := range []int64{sameBucket, otherBucket} {
			if after := untouched(t, r.pool, id); after != before[i] {
				t.Errorf("%s: the intent that has id %d now: %q → %q; want it untouched", tc.action, id, before[i], after)
			}
		}
		var audited []int64
		rows, err := r.pool.Query(ctx, `SELECT intent_id FROM effectd.audit WHERE bulk_snapshot = $1::uuid ORDER BY intent_id`, snap.Snapshot)
		if err == nil {
			audited, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil || len(audited) != 1 || audited[0] != kept {
			t.Errorf("%s: the snapshot's audit entries: intents %v, %v; want %d alone", tc.action, audited, err, kept)
		}
	}
	checkCitusCounts(t, r.pool, "after the bulk actions")
}
