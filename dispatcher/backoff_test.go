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
