package dispatcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/statemachine"
)

// heldSend answers every call with ref, once the test lets it.
type heldSend struct {
	ref     string
	entered chan struct{}
	release chan struct{}
}

func (h heldSend) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	h.entered <- struct{}{}
	<-h.release
	return h.ref, nil
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCallbackBeforeAnswer: the provider's status callback settles the intent
// SENT before the create call's answer is written, as real Twilio does, either
// before the completion's statement starts or while it waits for the event's
// transaction. The completion agrees with it: its attempt is recorded as
// settled by the callback, not fenced out, nothing counts as fenced, and
// nothing is logged above info.
func TestCallbackBeforeAnswer(t *testing.T) {
	t.Parallel()
	for _, during := range []bool{false, true} {
		name := map[bool]string{false: "callback committed first", true: "callback commits while the completion waits"}[during]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := heldSend{ref: "SM1", entered: make(chan struct{}, 1), release: make(chan struct{})}
			var logs syncBuffer
			pool := pgtest.New(t)
			d := run(t, pool, dispatcher.Config{
				Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: fastPolicy("twilio")}},
				Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			})
			r := rig{pool: pool, d: d}
			r.enqueue(t, "e")
			select {
			case <-p.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("no call within 10s")
			}
			ctx := context.Background()
			var id int64
			if err := pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'e'`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if !during {
				res, err := d.RecordEvent(ctx, dispatcher.ProviderEvent{Provider: "twilio", EventID: "SM1:queued", Channel: "c",
					IntentID: id, IntentEventID: "e", ObjectRef: "SM1", Type: "queued", Status: "queued", Delivery: statemachine.Accepted, Payload: json.RawMessage(`{}`)})
				if err != nil || res.Outcome != dispatcher.EventSettled {
					t.Fatalf("RecordEvent = %+v, %v; want settled", res, err)
				}
				close(p.release)
			} else {
				// What RecordEvent's transaction does, held open until the
				// completion's statement waits for it.
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `UPDATE effectd.intents SET status = 'SENT', provider_ref = 'SM1', lease_expires_at = NULL, delivery = 'accepted', delivery_at = now() WHERE id = $1`, id); err != nil {
					t.Fatal(err)
				}
				fixture.AddAttempts(t, tx, fixture.Attempt{IntentID: id, Kind: "callback",
					Outcome: "settled by a twilio event: queued", ProviderRef: "SM1"})
				close(p.release)
				eventually(t, 10*time.Second, "the completion waits for the event's transaction", func() bool {
					var n int
					pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
					return n > 0
				})
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var got row
			eventually(t, 10*time.Second, "the send attempt is recorded", func() bool {
				got = r.row(t, "e")
				return len(got.Outcomes) == 2
			})
			if got.Status != "SENT" || got.Ref != "SM1" || got.Outcomes[0] != "callback:settled by a twilio event: queued" ||
				got.Outcomes[1] != "send:sent (already settled by callback)" {
				t.Errorf("intent: %+v; want SENT SM1 with the callback, then the send settled by it", got)
			}
			if n := dispatcher.Fenced(d, "c"); n != 0 {
				t.Errorf("%v completions counted fenced out; want 0", n)
			}
			eventually(t, 10*time.Second, "the answer is logged", func() bool {
				return strings.Contains(logs.String(), "already settled by its callback")
			})
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "fenced") {
					t.Errorf("log line %q; want info only, without the alarm words", l)
				}
			}
		})
	}
}
