package effect_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/effect"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want effect.Class
	}{
		{"plain error", fmt.Errorf("boom"), effect.Class{Retryable: true, MaybeSent: true}},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), effect.Class{Retryable: true, MaybeSent: true}},
		{"retryable only", classified{retryable: true}, effect.Class{Retryable: true}},
		{"permanent", fmt.Errorf("wrapped: %w", classified{}), effect.Class{}},
		{"maybe sent", classified{retryable: true, maybeSent: true, after: time.Second},
			effect.Class{Retryable: true, MaybeSent: true, RetryAfter: time.Second}},
		{"permanent past its deadline", fmt.Errorf("%w: %w", classified{}, context.DeadlineExceeded),
			effect.Class{Retryable: true, MaybeSent: true}},
		{"rate limited", fmt.Errorf("send: %w", classified{retryable: true, after: 7 * time.Second}),
			effect.Class{Retryable: true, RetryAfter: 7 * time.Second}},
		{"retryable, silent on sending", fmt.Errorf("send: %w", retryableOnly{}), effect.Class{Retryable: true}},
	} {
		if got := effect.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

type classified struct {
	retryable, maybeSent bool
	after                time.Duration
}

func (c classified) Error() string             { return "classified" }
func (c classified) Retryable() bool           { return c.retryable }
func (c classified) MaybeSent() bool           { return c.maybeSent }
func (c classified) RetryAfter() time.Duration { return c.after }

// retryableOnly says it may be retried and nothing else: saying Retryable at
// all means the provider knows the call was not sent.
type retryableOnly struct{}

func (retryableOnly) Error() string   { return "retryable only" }
func (retryableOnly) Retryable() bool { return true }

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"1.5", 0},
		{"99999999999999", 0},
		{"31536000", 365 * 24 * time.Hour},
		{"31536001", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{now.Format(http.TimeFormat), 0},
		{now.Add(2 * time.Minute).Format(time.RFC850), 2 * time.Minute},
		{now.Add(3 * time.Minute).Format(time.ANSIC), 3 * time.Minute},
	} {
		if got := effect.ParseRetryAfter(tc.header, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}
