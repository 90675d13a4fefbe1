package intentdb

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestCompleteFencesOnTheIntent: a completion applies only to the row that
// still has its intent's key. After a failover that lost an enqueue, the
// intent's id is handed out again; the lost intent's completion must neither
// settle the new intent nor leave an attempt on it.
func TestCompleteFencesOnTheIntent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "pay", "stripe")
	fixture.AddChannel(t, pool, "sms", "twilio")
	// id 7 now names a refund; the SMS that had id 7 before the failover is gone.
	fixture.Intent(t, pool, fixture.ID(7), fixture.Event("evt-new"), fixture.Channel("pay"), fixture.Status("SENDING"),
		fixture.Lease(time.Now().Add(time.Minute)))
	now := time.Now()
	var created time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM effectd.intents WHERE id = 7`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	complete := func(key, ref string) []Fenced {
		t.Helper()
		var b CompleteBatch
		b.Add(Completion{ID: 7, Key: key, CreatedAt: created, Attempts: 1, Status: "SENT", ProviderRef: ref, NextAttemptAt: now,
			StartedAt: now, FinishedAt: now, Outcome: "sent", Called: true})
		fenced, err := Complete(ctx, pool, &b, true)
		if err != nil {
			t.Fatal(err)
		}
		return fenced
	}
	if f := complete("sms:evt-lost", "SMlost"); len(f) != 1 || !f[0].Lost {
		t.Fatalf("the lost SMS's completion: fenced %+v, want it lost", f)
	}
	var status string
	var ref *string
	var attempts int
	pool.QueryRow(ctx, `SELECT status, provider_ref, (SELECT count(*) FROM effectd.attempts WHERE intent_id = 7)
		FROM effectd.intents WHERE id = 7`).Scan(&status, &ref, &attempts)
	if status != "SENDING" || ref != nil || attempts != 0 {
		t.Fatalf("the refund after another intent's completion: %s, ref %v, %d attempts; want it untouched", status, ref, attempts)
	}
	if f := complete("pay:evt-new", "re_1"); len(f) != 0 {
		t.Fatalf("the refund's own completion: fenced %+v", f)
	}
	pool.QueryRow(ctx, `SELECT status, provider_ref, (SELECT count(*) FROM effectd.attempts WHERE intent_id = 7)
		FROM effectd.intents WHERE id = 7`).Scan(&status, &ref, &attempts)
	if status != "SENT" || ref == nil || *ref != "re_1" || attempts != 1 {
		t.Fatalf("the refund after its own completion: %s, ref %v, %d attempts", status, ref, attempts)
	}
}

// TestSettleFencesOnTheIntent: a reconciler's decision about a lost intent
// does not settle the intent that has its id now.
func TestSettleFencesOnTheIntent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "pay", "stripe")
	fixture.Intent(t, pool, fixture.ID(9), fixture.Event("evt-new"), fixture.Channel("pay"), fixture.Status("SENDING"),
		fixture.Lease(time.Now().Add(-time.Minute)))
	s := SettleParams{IntentID: 9, Attempts: 1, From: "SENDING", To: "SENT", ProviderRef: "re_x", StartedAt: time.Now(), Outcome: "found → SENT"}
	s.Key = "pay:evt-lost"
	if applied, err := Settle(ctx, pool, s); err != nil || applied {
		t.Fatalf("another intent's settlement: applied %v, %v", applied, err)
	}
	s.Key = "pay:evt-new"
	if applied, err := Settle(ctx, pool, s); err != nil || !applied {
		t.Fatalf("its own settlement: applied %v, %v", applied, err)
	}
}

// TestCompleteTwoAttemptsOfOneIntent: one batch may hold two outcomes of one
// intent, when an attempt's outcome waited in the queue (its writes failing)
// until the reconciler had settled it and the next attempt had answered. The
// next attempt's outcome applies; the stale one is recorded fenced out and
// returned as such, not taken for applied because its intent's id was.
func TestCompleteTwoAttemptsOfOneIntent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "hook", "webhook")
	made := fixture.Intent(t, pool, fixture.Event("evt"), fixture.Channel("hook"), fixture.Status("SENDING"), fixture.Attempts(2),
		fixture.Lease(time.Now().Add(time.Minute)))
	id, created := made.ID, made.CreatedAt
	now := time.Now()
	var b CompleteBatch
	for _, attempt := range []int32{1, 2} {
		b.Add(Completion{ID: id, Key: "hook:evt", CreatedAt: created, Attempts: attempt, Status: "SENT", ProviderRef: "msg_1",
			NextAttemptAt: now, StartedAt: now, FinishedAt: now, Outcome: "sent", Called: true})
	}
	fenced, err := Complete(ctx, pool, &b, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(fenced) != 1 || fenced[0].ID != id || fenced[0].Attempts != 1 || fenced[0].Raced || fenced[0].Lost || fenced[0].SettledEarly {
		t.Fatalf("fenced %+v, want attempt 1 alone fenced out", fenced)
	}
	rows, err := pool.Query(ctx, `SELECT attempt, outcome FROM effectd.attempts WHERE intent_id = $1 ORDER BY attempt`, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var a int
		var o string
		rows.Scan(&a, &o)
		got = append(got, fmt.Sprintf("%d %s", a, o))
	}
	if want := []string{"1 sent (fenced out)", "2 sent"}; !slices.Equal(got, want) {
		t.Fatalf("attempt rows %q, want %q", got, want)
	}
}
