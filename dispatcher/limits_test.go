package dispatcher_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/statemachine"
)

// TestEnqueueKeyBoundary: the key is <channel>:<event_id> up to exactly 255
// bytes (bytes, not characters), and <channel>:sha256:<hex of the event id>
// from 256 on.
func TestEnqueueKeyBoundary(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	hashed := func(event string) string {
		sum := sha256.Sum256([]byte(event))
		return "hook:sha256:" + hex.EncodeToString(sum[:])
	}
	for _, c := range []struct {
		name, event, key string
	}{
		{"255 bytes", strings.Repeat("a", 250), "hook:" + strings.Repeat("a", 250)},
		{"256 bytes", strings.Repeat("b", 251), hashed(strings.Repeat("b", 251))},
		{"255 bytes in 125 characters", strings.Repeat("é", 125), "hook:" + strings.Repeat("é", 125)},
		{"257 bytes in 126 characters", strings.Repeat("é", 126), hashed(strings.Repeat("é", 126))},
	} {
		if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: c.event, Channel: "hook", Payload: `{}`}); err != nil || !ok {
			t.Fatalf("%s: %v %v", c.name, ok, err)
		}
		var key string
		if err := pool.QueryRow(context.Background(), `SELECT idempotency_key FROM effectd.intents WHERE event_id = $1`, c.event).Scan(&key); err != nil {
			t.Fatal(err)
		}
		if key != c.key || len(key) > 255 {
			t.Errorf("%s: key %q (%d bytes), want %q", c.name, key, len(key), c.key)
		}
	}
}

// TestOrderingBehindFailedAndInDoubt: an intent waits only while an older one
// with its ordering key is PENDING or SENDING. A predecessor that ended FAILED
// or waits IN_DOUBT for an operator does not hold its successors back (see
// README, "Ordering keys").
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
