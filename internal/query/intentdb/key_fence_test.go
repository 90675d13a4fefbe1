package intentdb

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestDeliveryWritesFenceOnTheIntent: the statements that settle an intent by
// a provider event, move its delivery, or record a delivery poll apply only to
// the row that still has the intent's key. After a failover that lost an
// enqueue, the intent's id is handed out again; a write naming the lost
// intent (by its id and its key, "sms:lost") must leave the intent that has
// the id now untouched, its attempts too.
func TestDeliveryWritesFenceOnTheIntent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "sms", "twilio")
	fixture.Intent(t, pool, fixture.ID(7), fixture.Event("new"), fixture.Channel("sms"), fixture.Status("IN_DOUBT"))
	state := func() string {
		t.Helper()
		var s string
		if err := pool.QueryRow(ctx, `SELECT concat_ws(' ', status, provider_ref, delivery, delivery_detail,
			(SELECT count(*) FROM effectd.attempts WHERE intent_id = 7)) FROM effectd.intents WHERE id = 7`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(what, want string, applied bool, err error, wantApplied bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := state(); applied != wantApplied || got != want {
			t.Fatalf("%s: applied %v, intent %q; want %v, %q", what, applied, got, wantApplied, want)
		}
	}
	for _, key := range []string{"sms:lost", "sms:new"} {
		own := key == "sms:new"
		settle := SettleByEventParams{IntentID: 7, Key: key, Attempts: 1, From: "IN_DOUBT", ProviderRef: "SM-" + key, Outcome: "settled", Delivery: "accepted"}
		applied, err := SettleByEvent(ctx, pool, settle)
		check("settle by "+key, map[bool]string{false: "IN_DOUBT 0", true: "SENT SM-sms:new accepted 1"}[own], applied, err, own)
	}
	for _, key := range []string{"sms:lost", "sms:new"} {
		own := key == "sms:new"
		moved, err := SetDelivery(ctx, pool, DeliveryChange{IntentID: 7, Key: key, From: "accepted", To: "undelivered", Detail: "undelivered 30003"})
		check("set delivery by "+key, map[bool]string{false: "SENT SM-sms:new accepted 1", true: "SENT SM-sms:new undelivered undelivered 30003 1"}[own],
			moved, err, own)
	}
	for _, key := range []string{"sms:lost", "sms:new"} {
		own := key == "sms:new"
		moved, err := RecordPoll(ctx, pool, Poll{IntentID: 7, Key: key, Attempts: 1, From: "undelivered", To: "delivered",
			Detail: "delivered", StartedAt: time.Now(), Outcome: "poll", ProviderRef: "SM-" + key})
		want := map[bool]string{false: "SENT SM-sms:new undelivered undelivered 30003 1", true: "SENT SM-sms:new delivered delivered 2"}[own]
		check(fmt.Sprintf("poll by %s", key), want, moved, err, own)
	}
}

// TestOperateFencesOnTheIntent: an operator's transition applies only to the
// row that still has the key of the intent it was read with; an intent that
// was given the id after a failover is left as it is.
func TestOperateFencesOnTheIntent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "sms", "twilio")
	fixture.Intent(t, pool, fixture.ID(7), fixture.Event("new"), fixture.Channel("sms"))
	tr := Transition{IntentID: 7, Key: "sms:lost", From: "PENDING", Attempts: 0, To: "CANCELLED"}
	if after, err := Operate(ctx, pool, tr); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("another intent's transition: %s, %v; want no row", after.Status, err)
	}
	tr.Key = "sms:new"
	if after, err := Operate(ctx, pool, tr); err != nil || after.Status != "CANCELLED" {
		t.Fatalf("its own transition: %s, %v", after.Status, err)
	}
}
