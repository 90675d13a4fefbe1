package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
)

// TestLateOutcomeWhileNewerAttemptSends: attempt 1 stalls past its lease; the
// reconciler sends the intent again, and while attempt 2 holds the row in
// SENDING, attempt 1's answer arrives. The row is SENDING as the stale worker
// expects, so only the attempt number fences it out: it must neither settle
// the row nor end attempt 2's lease, and attempt 2's answer settles it.
func TestLateOutcomeWhileNewerAttemptSends(t *testing.T) {
	t.Parallel()
	first, second := make(chan struct{}), make(chan struct{})
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch n {
		case 1:
			<-first // a stalled worker that ignores its deadline
			return "ref-first", nil
		case 2:
			<-second
			return "ref-second", nil
		}
		return "", providerErr{retryable: false}
	}}
	pol := fastPolicy("webhook")
	pol.InDoubt = policy.InDoubtResend
	pol.Lease = policy.Duration(time.Minute) // attempt 2 keeps its lease for the whole test
	r := start(t, "webhook", keyedProvider{p}, pol)
	defer close(second)
	r.enqueue(t, "e")
	ctx := context.Background()
	eventually(t, 10*time.Second, "attempt 1 calls", func() bool { return p.Calls("c:e") == 1 })
	// Attempt 1's lease ends (as if its worker had been stalled for a minute).
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET lease_expires_at = now() - interval '1 second' WHERE event_id = 'e' AND attempts = 1`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "attempt 2 calls", func() bool { return p.Calls("c:e") == 2 })
	if got := r.row(t, "e"); got.Status != "SENDING" || got.Attempts != 2 {
		t.Fatalf("before the late answer: %+v; want SENDING attempt 2", got)
	}

	close(first)
	var got row
	eventually(t, 10*time.Second, "attempt 1's answer is recorded", func() bool {
		got = r.row(t, "e")
		for _, o := range got.Outcomes {
			if o == "send:sent (fenced out)" || o == "send:sent" {
				return true
			}
		}
		return false
	})
	var lease *time.Time
	if err := r.pool.QueryRow(ctx, `SELECT lease_expires_at FROM effectd.intents WHERE event_id = 'e'`).Scan(&lease); err != nil {
		t.Fatal(err)
	}
	if got.Status != "SENDING" || got.Attempts != 2 || got.Ref != "" || lease == nil || time.Until(*lease) < 30*time.Second {
		t.Fatalf("attempt 1's late answer changed the row attempt 2 holds: %+v, lease until %v", got, lease)
	}
	// The counter follows the statement that recorded the attempt.
	eventually(t, 5*time.Second, "the fenced-out outcome is counted", func() bool { return dispatcher.Fenced(r.d, "c") == 1 })

	second <- struct{}{}
	got = r.waitStatus(t, "e", "SENT")
	if got.Ref != "ref-second" || got.Attempts != 2 || p.Calls("c:e") != 2 {
		t.Fatalf("after attempt 2: %+v after %d calls", got, p.Calls("c:e"))
	}
}

// TestLateOutcomeAfterReconcile: attempt 1 stalls past its lease and the
// reconciler settles the row (policy skip) without a new attempt. When attempt
// 1's answer arrives its attempt number still matches: only the status fences
// it out, and the row stays SKIPPED.
func TestLateOutcomeAfterReconcile(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) {
		<-release // a stalled worker that ignores its deadline
		return "ref-late", nil
	}}
	pol := fastPolicy("webhook")
	pol.InDoubt = policy.InDoubtSkip
	r := start(t, "webhook", keyedProvider{p}, pol)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	r.enqueue(t, "e")
	eventually(t, 10*time.Second, "attempt 1 calls", func() bool { return p.Calls("c:e") == 1 })
	if _, err := r.pool.Exec(context.Background(), `UPDATE effectd.intents SET lease_expires_at = now() - interval '1 second' WHERE event_id = 'e'`); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, "e", "SKIPPED")
	close(release)
	var got row
	eventually(t, 10*time.Second, "the late answer is recorded", func() bool {
		got = r.row(t, "e")
		for _, o := range got.Outcomes {
			if strings.HasPrefix(o, "send:sent") {
				return true
			}
		}
		return false
	})
	if got.Status != "SKIPPED" || got.Ref != "" || got.Attempts != 1 {
		t.Fatalf("the late answer overwrote the settled row: %+v", got)
	}
	// The counter follows the statement that recorded the attempt.
	eventually(t, 5*time.Second, "the fenced-out outcome is counted", func() bool { return dispatcher.Fenced(r.d, "c") == 1 })
}
