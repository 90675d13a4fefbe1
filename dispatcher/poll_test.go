package dispatcher_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// polled sends at once and answers polls from a script: the n-th poll of a
// reference gets statuses[n] (the last one once the script runs out).
type polled struct {
	mu       sync.Mutex
	polls    map[string]int
	statuses []string
}

func (p *polled) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	return "SM1", nil
}

func (p *polled) Poll(_ context.Context, ref string) (status, delivery, detail string, reversal bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.polls[ref]
	p.polls[ref]++
	status = p.statuses[min(n, len(p.statuses)-1)]
	delivery = map[string]string{"sent": "accepted", "delivered": "delivered", "undelivered": "undelivered"}[status]
	return status, delivery, status, false, nil
}

func (p *polled) count(ref string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls[ref]
}

// TestDeliveryPoll: the delivery is polled at the listed delays after SENT
// until it is final, and then never again. The loop is off (an hour apart):
// the test drives PollDeliveries itself.
func TestDeliveryPoll(t *testing.T) {
	t.Parallel()
	p := &polled{polls: map[string]int{}, statuses: []string{"sent", "delivered"}}
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond), policy.Duration(2 * time.Millisecond), policy.Duration(3 * time.Millisecond)}
	pool := pgtest.New(t)
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}}, DeliveryPollInterval: time.Hour})
	r := rig{pool: pool, d: d}
	r.enqueue(t, "e1")
	r.waitStatus(t, "e1", "SENT")
	ctx := context.Background()
	for i, want := range []string{"accepted", "delivered"} {
		eventually(t, 10*time.Second, "poll "+want, func() bool {
			n, err := dispatcher.PollDeliveries(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		var delivery string
		pool.QueryRow(ctx, `SELECT coalesce(delivery, '') FROM effectd.intents WHERE event_id = 'e1'`).Scan(&delivery)
		if delivery != want || p.count("SM1") != i+1 {
			t.Fatalf("after poll %d: delivery %q after %d polls, want %q", i+1, delivery, p.count("SM1"), want)
		}
	}
	// Final: the third delay has passed, and nothing is polled.
	var past bool
	eventually(t, 10*time.Second, "the last delay passed", func() bool {
		pool.QueryRow(ctx, `SELECT now() > delivery_at + interval '3 ms' FROM effectd.intents WHERE event_id = 'e1'`).Scan(&past)
		return past
	})
	if n, err := dispatcher.PollDeliveries(ctx, d); err != nil || n != 0 || p.count("SM1") != 2 {
		t.Errorf("after delivered: polled %d (%v), %d polls in all; want no more", n, err, p.count("SM1"))
	}
	if x := r.row(t, "e1"); len(x.Outcomes) != 3 || x.Outcomes[1] != "poll:poll: sent → accepted" || x.Outcomes[2] != "poll:poll: delivered → delivered" {
		t.Errorf("attempts: %v", x.Outcomes)
	}
}

// TestDeliveryPollOff: an empty delivery_poll polls nothing.
func TestDeliveryPollOff(t *testing.T) {
	t.Parallel()
	p := &polled{polls: map[string]int{}, statuses: []string{"delivered"}}
	pool := pgtest.New(t)
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: fastPolicy("twilio")}}, DeliveryPollInterval: 10 * time.Millisecond})
	r := rig{pool: pool, d: d}
	r.enqueue(t, "e1")
	r.waitStatus(t, "e1", "SENT")
	if n, err := dispatcher.PollDeliveries(context.Background(), d); err != nil || n != 0 || p.count("SM1") != 0 {
		t.Fatalf("PollDeliveries = %d, %v; polls %d; want none", n, err, p.count("SM1"))
	}
}

// TestPollDelaysValidate refuses delays that are not increasing and positive.
func TestPollDelaysValidate(t *testing.T) {
	for _, bad := range []string{`{"delivery_poll":["10m","1m"]}`, `{"delivery_poll":["0s"]}`, `{"delivery_poll":"1m"}`,
		`{"delivery_poll":["1s","2s","3s","4s","5s","6s","7s","8s","9s"]}`} {
		if _, err := policy.Default("twilio").Merge([]byte(bad)); err == nil {
			t.Errorf("Merge(%s) accepted", bad)
		}
	}
	p, err := policy.Default("twilio").Merge([]byte(`{"delivery_poll":["1m","10m","1h","24h"]}`))
	if err != nil || len(p.DeliveryPoll.List()) != 4 || p.DeliveryPoll[3].D() != 24*time.Hour {
		t.Fatalf("Merge = %+v, %v", p.DeliveryPoll, err)
	}
	b, _ := json.Marshal(p)
	var back map[string]any
	json.Unmarshal(b, &back)
	if l, _ := back["delivery_poll"].([]any); len(l) != 4 || l[0] != "1m0s" {
		t.Errorf("marshalled delivery_poll = %v", back["delivery_poll"])
	}
}
