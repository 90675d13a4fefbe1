package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

func backoffPolicy(base, max time.Duration) policy.Policy {
	p := policy.Default("webhook")
	p.Backoff = policy.Backoff{Base: policy.Duration(base), Max: policy.Duration(max)}
	return p
}

// TestBackoffBounds: after attempt n the delay is drawn from [d/2, d], where d
// is base·2^(n-1) capped at max (equal jitter), and never shorter than a
// Retry-After.
func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	p := backoffPolicy(time.Second, 10*time.Minute)
	const draws = 500
	cases := []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 500 * time.Millisecond, time.Second},
		{2, 0, time.Second, 2 * time.Second},
		{3, 0, 2 * time.Second, 4 * time.Second},
		{8, 0, 64 * time.Second, 128 * time.Second},
		{10, 0, 256 * time.Second, 512 * time.Second},
		{11, 0, 5 * time.Minute, 10 * time.Minute}, // 1024 s: capped
		{1000, 0, 5 * time.Minute, 10 * time.Minute},
		{1, 3 * time.Second, 3 * time.Second, 3 * time.Second},           // Retry-After longer than the backoff
		{1, 700 * time.Millisecond, 700 * time.Millisecond, time.Second}, // within it: the jitter may still pick more
		{3, time.Hour, time.Hour, time.Hour},                             // longer than the cap too
	}
	for _, c := range cases {
		var min, max time.Duration
		lowHalf, highHalf := false, false
		for i := range draws {
			d := dispatcher.NextDelay(p, c.attempt, c.retryAfter)
			if i == 0 || d < min {
				min = d
			}
			if d > max {
				max = d
			}
			mid := c.lo + (c.hi-c.lo)/2
			lowHalf = lowHalf || d < mid
			highHalf = highHalf || d > mid
		}
		if min < c.lo || max > c.hi {
			t.Errorf("attempt %d, Retry-After %s: delays in [%s, %s], want within [%s, %s]", c.attempt, c.retryAfter, min, max, c.lo, c.hi)
		}
		// Jitter: the draws spread over the range (with 500 uniform draws,
		// missing a half has a probability of 2^-499).
		if c.lo != c.hi && (!lowHalf || !highHalf) {
			t.Errorf("attempt %d, Retry-After %s: delays in [%s, %s] do not spread over [%s, %s]", c.attempt, c.retryAfter, min, max, c.lo, c.hi)
		}
	}
}

// TestBackoffSetsNextAttempt: a retryable failure is retried after the
// policy's backoff, counted from the end of the call; one with a Retry-After
// no sooner than that, for that intent.
func TestBackoffSetsNextAttempt(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if key == "limited:e" {
			return "", providerErr{retryable: true, after: 3 * time.Hour}
		}
		return "", providerErr{retryable: true}
	}}
	pol := backoffPolicy(time.Hour, 2*time.Hour)
	pool := pgtest.New(t)
	run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{
		{Name: "busy", Kind: "webhook", Provider: keyedProvider{p}, Policy: pol},
		{Name: "limited", Kind: "webhook", Provider: keyedProvider{p}, Policy: pol},
	}})
	ctx := context.Background()
	for _, ch := range []string{"busy", "limited"} {
		if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "e", Channel: ch, Payload: `{}`}); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	wait := func(ch string) time.Duration {
		var secs float64
		eventually(t, 10*time.Second, ch+": the first attempt is recorded", func() bool {
			var status string
			err := pool.QueryRow(ctx, `SELECT i.status, extract(epoch FROM i.next_attempt_at - a.finished_at)::float8 FROM effectd.intents i
				JOIN effectd.attempts a ON a.intent_id = i.id AND a.attempt = 1 WHERE i.channel = $1`, ch).Scan(&status, &secs)
			return err == nil && status == "PENDING"
		})
		return time.Duration(secs * float64(time.Second))
	}
	if d := wait("busy"); d < 30*time.Minute || d > time.Hour {
		t.Errorf("busy: next attempt %s after the failed call, want within [30m, 1h]", d)
	}
	if d := wait("limited"); d < 3*time.Hour {
		t.Errorf("limited: next attempt %s after a call answered with Retry-After 3h", d)
	}
}
