package stripe

import (
	"testing"
	"time"
)

// TestLookupReplays: inside the key window a lookup repeats the call with its
// key (so a dry run must not call it); past the window it lists instead.
func TestLookupReplays(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := &Provider{now: func() time.Time { return now }}
	if !p.LookupReplays(now.Add(-time.Hour)) {
		t.Error("an intent an hour old: the lookup should replay")
	}
	if p.LookupReplays(now.Add(-ReplayWindow - time.Minute)) {
		t.Error("an intent past the key window: the lookup lists, it does not replay")
	}
}
