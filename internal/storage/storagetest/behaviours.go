package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query/intentdb"
)

// claimTakesDueSkipsHeld: a claim moves due PENDING intents to SENDING
// under a lease with their next attempt, skips a row another transaction
// holds (without waiting for it), and never takes a SENDING row again.
func claimTakesDueSkipsHeld(t *testing.T, h Harness) {
	for i, ev := range []string{"claim-1", "claim-2", "claim-held"} {
		h.Enqueue(t, "claim", ev, i)
	}
	held := intent(t, h, "claim-held")
	ctx := testCtx(t)
	tx, err := h.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := h.Store.EventIntent(ctx, tx, "claim", intentdb.EventObject{IntentID: held.ID, EventID: "claim-held"}); err != nil {
		t.Fatalf("locking claim-held: %v", err)
	}
	rows := claim(t, h, "claim", 10, time.Minute)
	if len(rows) != 2 {
		t.Fatalf("claimed %d rows, want 2 (claim-1, claim-2; claim-held is held)", len(rows))
	}
	for _, ev := range []string{"claim-1", "claim-2"} {
		r := intent(t, h, ev)
		c, ok := byID(rows, r.ID)
		if !ok || r.Status != "SENDING" || !r.LeaseLive || r.Attempts != 1 || c.Attempts != 1 || c.Key != r.Key {
			t.Errorf("%s after the claim: %+v (claimed %v: %+v); want SENDING under a live lease, attempt 1", ev, r, ok, c)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := intent(t, h, "claim-held"); r.Status != "PENDING" || r.Attempts != 0 {
		t.Errorf("claim-held: %+v; want PENDING, never attempted", r)
	}
	rows = claim(t, h, "claim", 10, time.Minute)
	if len(rows) != 1 || rows[0].ID != held.ID {
		t.Errorf("second claim: %+v; want claim-held alone (SENDING rows are not taken again)", rows)
	}
}

// completion is a SENT outcome of c.
func completion(c intentdb.Claimed) intentdb.Completion {
	now := time.Now()
	return intentdb.Completion{ID: c.ID, Key: c.Key, CreatedAt: c.CreatedAt, Attempts: c.Attempts, Status: "SENT",
		ProviderRef: "ref-" + c.EventID, NextAttemptAt: now, StartedAt: now, FinishedAt: now, Outcome: "sent", Called: true}
}

// complete writes one completion and reports whether it was applied.
func complete(t *testing.T, h Harness, q intentdb.Completion, bucket int64) bool {
	t.Helper()
	var b intentdb.CompleteBatch
	b.Add(q)
	fenced, err := h.Store.Complete(testCtx(t), h.Pool, &b, false, bucket)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return len(fenced) == 0
}

// completeFencedOnKeyAttemptsStatus: an outcome is written only to the row
// that still has its key and attempt and is SENDING.
func completeFencedOnKeyAttemptsStatus(t *testing.T, h Harness) {
	h.Enqueue(t, "complete", "complete-1", 1)
	rows := claim(t, h, "complete", 1, time.Minute)
	if len(rows) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(rows))
	}
	c := rows[0]
	stale := completion(c)
	stale.Attempts++
	other := completion(c)
	other.Key = "another intent's key"
	for name, q := range map[string]intentdb.Completion{"another attempt": stale, "another key": other} {
		if complete(t, h, q, c.Bucket) {
			t.Errorf("the completion of %s was applied", name)
		}
		if r := intent(t, h, "complete-1"); r.Status != "SENDING" {
			t.Fatalf("after the completion of %s: %+v; want SENDING", name, r)
		}
	}
	if !complete(t, h, completion(c), c.Bucket) {
		t.Fatal("the completion of the claimed attempt was fenced out")
	}
	if r := intent(t, h, "complete-1"); r.Status != "SENT" || r.ProviderRef != "ref-complete-1" {
		t.Fatalf("after the completion: %+v; want SENT with ref-complete-1", r)
	}
	late := completion(c)
	late.ProviderRef = "ref-late"
	if complete(t, h, late, c.Bucket) {
		t.Error("a second completion of a SENT row was applied")
	}
}

// settleOfExpiredLeaseFenced: only an expired lease is taken, and its
// settlement applies once, to the row that still has its key, attempt and
// status.
func settleOfExpiredLeaseFenced(t *testing.T, h Harness) {
	h.Enqueue(t, "settle", "settle-live", 0)
	claim(t, h, "settle", 1, time.Hour)
	h.Enqueue(t, "settle", "settle-expired", 1)
	claim(t, h, "settle", 1, time.Millisecond)
	var taken []intentdb.Unsettled
	deadline := time.Now().Add(10 * time.Second)
	for len(taken) == 0 && time.Now().Before(deadline) {
		var err error
		if taken, err = h.Store.TakeExpired(testCtx(t), onPool(h.Pool), 10, []string{"settle"}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	expired := intent(t, h, "settle-expired")
	if len(taken) != 1 || taken[0].ID != expired.ID {
		t.Fatalf("TakeExpired = %+v; want settle-expired alone (settle-live's lease is live)", taken)
	}
	u := taken[0]
	s := intentdb.SettleParams{IntentID: u.ID, Key: u.Key, Attempts: u.Attempts, From: "SENDING", To: "PENDING", StartedAt: time.Now(), Outcome: "absent → PENDING"}
	stale, other := s, s
	stale.Attempts++
	other.Key = "another intent's key"
	for name, x := range map[string]intentdb.SettleParams{"another attempt": stale, "another key": other} {
		if ok, err := h.Store.Settle(testCtx(t), h.Pool, x, u.Bucket); err != nil || ok {
			t.Errorf("the settlement of %s: applied %v, %v; want fenced out", name, ok, err)
		}
	}
	if ok, err := h.Store.Settle(testCtx(t), h.Pool, s, u.Bucket); err != nil || !ok {
		t.Fatalf("Settle: applied %v, %v; want applied", ok, err)
	}
	if ok, err := h.Store.Settle(testCtx(t), h.Pool, s, u.Bucket); err != nil || ok {
		t.Errorf("Settle again: applied %v, %v; want fenced out (the row is PENDING)", ok, err)
	}
	if r := intent(t, h, "settle-expired"); r.Status != "PENDING" {
		t.Errorf("settle-expired: %+v; want PENDING", r)
	}
}

// eventSettle settles the intent of event SENT by a provider event under
// key, with delivery, and reports whether it applied.
func eventSettle(t *testing.T, h Harness, channel, event, key, delivery string) bool {
	t.Helper()
	var applied bool
	inTx(t, h, func(ctx context.Context, tx pgx.Tx) error {
		id := intent(t, h, event).ID
		in, err := h.Store.EventIntent(ctx, tx, channel, intentdb.EventObject{IntentID: id, EventID: event, Ref: "ref-" + event})
		if err != nil {
			return err
		}
		applied, err = h.Store.SettleByEvent(ctx, tx, in, intentdb.SettleByEventParams{IntentID: in.ID, Key: key, Attempts: in.Attempts,
			From: string(in.Status), ProviderRef: "ref-" + event, Outcome: "callback", Delivery: delivery})
		return err
	})
	return applied
}

// settleByEventFencedOnKey: a provider event settles the intent it names,
// fenced on the intent's key; its delivery moves fenced on the key and the
// delivery it had; an event naming no intent finds none.
func settleByEventFencedOnKey(t *testing.T, h Harness) {
	h.Enqueue(t, "events", "events-1", 2)
	claim(t, h, "events", 1, time.Minute)
	r := intent(t, h, "events-1")
	if eventSettle(t, h, "events", "events-1", "another intent's key", "") {
		t.Error("an event's settlement under another key was applied")
	}
	if !eventSettle(t, h, "events", "events-1", r.Key, "accepted") {
		t.Fatal("the event's settlement was fenced out")
	}
	if r := intent(t, h, "events-1"); r.Status != "SENT" || r.ProviderRef != "ref-events-1" || r.Delivery != "accepted" {
		t.Fatalf("after the event: %+v; want SENT, ref-events-1, accepted", r)
	}
	for _, c := range []struct {
		key, from string
		want      bool
	}{{"another intent's key", "accepted", false}, {r.Key, "", false}, {r.Key, "accepted", true}} {
		inTx(t, h, func(ctx context.Context, tx pgx.Tx) error {
			in, err := h.Store.EventIntent(ctx, tx, "events", intentdb.EventObject{Ref: "ref-events-1"})
			if err != nil {
				return err
			}
			moved, err := h.Store.SetDelivery(ctx, tx, in, intentdb.DeliveryChange{IntentID: in.ID, Key: c.key, From: c.from, To: "delivered"})
			if moved != c.want {
				t.Errorf("SetDelivery(key %q, from %q) moved %v; want %v", c.key, c.from, moved, c.want)
			}
			return err
		})
	}
	inTx(t, h, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := h.Store.EventIntent(ctx, tx, "events", intentdb.EventObject{IntentID: r.ID, EventID: "no such event", Ref: "no such ref"}); !errNoIntent(err) {
			t.Errorf("EventIntent of no intent: %v; want pgx.ErrNoRows", err)
		}
		return nil
	})
}
