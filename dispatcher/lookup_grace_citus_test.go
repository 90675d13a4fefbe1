//go:build citus

package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
)

// TestCitusLookupWaitsForTheProvidersGrace is the maybe-sent half of
// TestLookupWaitsForTheProvidersGrace in the distributed mode, where the
// completion is complete_bucket.sql: the row stays SENDING the channel's
// grace after the call, so the lookup finds the SMS the provider made after
// the call's deadline, and nothing is sent twice.
func TestCitusLookupWaitsForTheProvidersGrace(t *testing.T) {
	const buckets = 4
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &lateMaker{makeAfter: 2500 * time.Millisecond}
	pol := fastPolicy("twilio")
	pol.Lease, pol.LookupGrace = policy.Duration(8*time.Second), policy.Duration(4*time.Second)
	pol.InDoubt, pol.LookupFallback = policy.InDoubtLookup, policy.InDoubtManual
	chans := []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e', channel => 'c', payload => '{"to":"+15005550006","body":"hi"}', bucket => 1)`); err != nil {
		t.Fatal(err)
	}
	var status, ref string
	eventually(t, 60*time.Second, "e → SENT", func() bool {
		if err := pool.QueryRow(ctx, `SELECT status, coalesce(provider_ref, '') FROM effectd.intents WHERE event_id = 'e'`).Scan(&status, &ref); err != nil {
			t.Fatal(err)
		}
		return status == "SENT"
	})
	if ref != "SM-first" || p.Sends() != 1 {
		t.Fatalf("SENT with %q after %d calls; want the first call's SMS found, one call", ref, p.Sends())
	}
	// The maybe-sent completion was written (not a lease that ran out
	// because completions failed): its attempt row says so.
	var outcomes string
	if err := pool.QueryRow(ctx, `SELECT string_agg(kind || ':' || coalesce(outcome, ''), ' ' ORDER BY started_at, kind)
		FROM effectd.attempts WHERE intent_id = (SELECT id FROM effectd.intents WHERE event_id = 'e')`).Scan(&outcomes); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(outcomes, "send:maybe_sent ") {
		t.Fatalf("attempts %q; want the call's maybe_sent completion first", outcomes)
	}
}
