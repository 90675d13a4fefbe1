package dispatcher_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// TestEnqueueKeyBoundary: the key is <channel>:<event_id> up to exactly 255
// bytes (bytes, not characters), and <channel>:sha256:<hex of the event id>
// from 256 on, through enqueue and enqueue_many alike.
func TestEnqueueKeyBoundary(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	hashed := func(event string) string {
		sum := sha256.Sum256([]byte(event))
		return "hook:sha256:" + hex.EncodeToString(sum[:])
	}
	// the same boundary through enqueue (one letter) and enqueue_many (another)
	for _, way := range []struct{ name, a, b string }{{"enqueue", "a", "é"}, {"enqueue_many", "b", "è"}} {
		for _, c := range []struct {
			name, event string
			hashed      bool
		}{
			{"255 bytes", strings.Repeat(way.a, 250), false},
			{"256 bytes", strings.Repeat(way.a, 251), true},
			{"255 bytes in 125 characters", strings.Repeat(way.b, 125), false},
			{"257 bytes in 126 characters", strings.Repeat(way.b, 126), true},
		} {
			want := "hook:" + c.event
			if c.hashed {
				want = hashed(c.event)
			}
			if way.name == "enqueue" {
				if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: c.event, Channel: "hook", Payload: `{}`}); err != nil || !ok {
					t.Fatalf("%s, %s: %v %v", way.name, c.name, ok, err)
				}
			} else {
				var outcome string
				if err := pool.QueryRow(context.Background(), `SELECT outcome FROM effectd.enqueue_many(ARRAY[ROW($1, 'hook', '{}'::jsonb,
					NULL, NULL, NULL)::effectd.new_intent])`, c.event).Scan(&outcome); err != nil || outcome != "new" {
					t.Fatalf("%s, %s: %q %v", way.name, c.name, outcome, err)
				}
			}
			var key string
			if err := pool.QueryRow(context.Background(), `SELECT idempotency_key FROM effectd.intents WHERE event_id = $1`, c.event).Scan(&key); err != nil {
				t.Fatal(err)
			}
			if key != want || len(key) > 255 {
				t.Errorf("%s, %s: key %q (%d bytes), want %q", way.name, c.name, key, len(key), want)
			}
		}
	}
}

// TestOrderingBehindFailedAndInDoubt: an intent waits only while an older one
// with its ordering key is PENDING or SENDING. A predecessor that ended FAILED
// or waits IN_DOUBT for an operator does not hold its successors back (see
// docs/architecture.md, "Ordering keys").
func TestOrderingBehindFailedAndInDoubt(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	r := start(t, "webhook", keyedProvider{p}, fastPolicy("webhook"))
	ctx := context.Background()
	for i, s := range []statemachine.State{statemachine.Failed, statemachine.InDoubt} {
		id := seedAged(t, r.pool, "c", "webhook", "before-"+string(s), s, 0, true)
		key := "acct-" + string(rune('a'+i))
		if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET ordering_key = $2 WHERE id = $1`, id, key); err != nil {
			t.Fatal(err)
		}
		if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: "after-" + string(s), Channel: "c", Payload: `{}`, OrderingKey: key}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		r.waitStatus(t, "after-"+string(s), "SENT")
		if got := r.row(t, "before-"+string(s)); got.Status != string(s) {
			t.Errorf("the predecessor moved: %+v", got)
		}
	}
}

// TestEnqueueSMSBodyAndMaxPayload: an SMS body is refused past 1,600
// characters (Twilio's limit; characters, not bytes), and a channel's
// max_payload bounds its payloads, for webhook channels too.
func TestEnqueueSMSBodyAndMaxPayload(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	chans := []dispatcher.Channel{
		{Name: "sms", Kind: "twilio", Policy: policy.Default("twilio")},
		{Name: "small-hook", Kind: "webhook", Policy: policy.Default("webhook"), MaxPayload: 1024},
		{Name: "small-sms", Kind: "twilio", Policy: policy.Default("twilio"), MaxPayload: 1024},
	}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	sms := func(body string) map[string]any { return map[string]any{"to": "+15005550006", "body": body} }
	for _, c := range []struct {
		name    string
		channel string
		payload any
		field   string // "" when accepted
	}{
		{"1,600 characters", "sms", sms(strings.Repeat("a", 1600)), ""},
		{"1,600 two-byte characters", "sms", sms(strings.Repeat("é", 1600)), ""},
		{"1,601 characters", "sms", sms(strings.Repeat("a", 1601)), "payload.body"},
		{"webhook under its max_payload", "small-hook", map[string]any{"x": strings.Repeat("a", 900)}, ""},
		{"webhook over its max_payload", "small-hook", map[string]any{"x": strings.Repeat("a", 1100)}, "payload"},
		{"SMS over its channel's max_payload", "small-sms", sms(strings.Repeat("a", 1100)), "payload"},
	} {
		ok, err := enqueue(t, pool, dispatcher.Intent{EventID: c.name, Channel: c.channel, Payload: c.payload})
		var bad *dispatcher.InputError
		switch {
		case c.field == "" && (err != nil || !ok):
			t.Errorf("%s: %v, %v; want accepted", c.name, ok, err)
		case c.field != "" && (!errors.As(err, &bad) || bad.Field != c.field):
			t.Errorf("%s: %v; want refused naming %s", c.name, err, c.field)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("intents = %d, %v; want the 3 accepted", n, err)
	}
}
