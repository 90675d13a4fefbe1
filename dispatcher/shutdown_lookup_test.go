package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
)

// blockingLookup is a provider without keys whose lookups block until their
// context ends; entered is signalled as each lookup starts.
type blockingLookup struct {
	*scripted
	entered chan struct{}
}

func (b blockingLookup) Lookup(ctx context.Context, _ string, _ json.RawMessage, _ map[string]string, _, _ time.Time) (string, bool, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return "", false, ctx.Err()
}

// TestStopLeavesLookupForNextInstance: Stop cuts short a lookup in progress.
// A lookup cut short by shutdown says nothing about the provider: the row
// stays SENDING with its lease expired, for the next instance to look up
// again, instead of following lookup_fallback to IN_DOUBT.
func TestStopLeavesLookupForNextInstance(t *testing.T) {
	t.Parallel()
	p := blockingLookup{maybeSentOnce(), make(chan struct{}, 1)}
	pol := fastPolicy("twilio")
	pol.InDoubt, pol.LookupFallback = policy.InDoubtLookup, policy.InDoubtManual
	r := start(t, "twilio", p, pol)
	r.enqueue(t, "e")
	select {
	case <-p.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no lookup within 10s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	got := r.row(t, "e")
	var expired bool
	if err := r.pool.QueryRow(ctx, `SELECT coalesce(lease_expires_at <= now(), false) FROM effectd.intents WHERE event_id = 'e'`).Scan(&expired); err != nil {
		t.Fatal(err)
	}
	if got.Status != "SENDING" || !expired || len(got.Outcomes) != 1 || got.Outcomes[0] != "send:maybe_sent" {
		t.Errorf("after Stop: %+v, lease expired %v; want SENDING with its lease expired and only the send attempt", got, expired)
	}
	if n := dispatcher.Lookups(r.d, "c", dispatcher.LookupAmbiguous); n != 0 {
		t.Errorf("%v lookups counted ambiguous; want 0", n)
	}
}
