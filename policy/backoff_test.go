package policy_test

import (
	"testing"
	"time"

	"github.com/effectd/effectd/policy"
)

// TestBackoffDelay: after attempt n the delay is drawn from [d/2, d], where d
// is base·2^(n-1) capped at max (equal jitter), spread over that range, and
// never shorter than a Retry-After.
func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := policy.Backoff{Base: policy.Duration(time.Second), Max: policy.Duration(10 * time.Minute)}
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
		{1 << 20, 0, 5 * time.Minute, 10 * time.Minute},
		{1, 3 * time.Second, 3 * time.Second, 3 * time.Second},
		{1, 700 * time.Millisecond, 700 * time.Millisecond, time.Second},
		{3, time.Hour, time.Hour, time.Hour}, // longer than the cap too
	}
	for _, c := range cases {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 500 {
			d := b.Delay(c.attempt, c.retryAfter)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < c.lo || hi > c.hi {
			t.Errorf("attempt %d, Retry-After %s: delays in [%s, %s], want within [%s, %s]", c.attempt, c.retryAfter, lo, hi, c.lo, c.hi)
		}
		// Jitter spreads the draws over the range: with 500 uniform draws, none
		// in the lowest or highest tenth has a probability of 0.9^500.
		if tenth := (c.hi - c.lo) / 10; tenth > 0 && (lo > c.lo+tenth || hi < c.hi-tenth) {
			t.Errorf("attempt %d, Retry-After %s: delays in [%s, %s] do not spread over [%s, %s]", c.attempt, c.retryAfter, lo, hi, c.lo, c.hi)
		}
	}
	// A base equal to the cap waits that long, halved at most.
	flat := policy.Backoff{Base: policy.Duration(time.Minute), Max: policy.Duration(time.Minute)}
	if d := flat.Delay(5, 0); d < 30*time.Second || d > time.Minute {
		t.Errorf("flat backoff: %s, want within [30s, 1m]", d)
	}
}
