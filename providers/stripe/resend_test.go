package stripe

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox"
)

// TestNoHiddenResendOnReusedConnection: net/http resends a POST carrying an
// Idempotency-Key by itself when a reused connection dies before the answer.
// Stripe would then see two calls where the dispatcher records one. Every
// call the provider makes reaches Stripe exactly once, and a lost answer is
// reported as maybe sent, so the dispatcher records it.
func TestNoHiddenResendOnReusedConnection(t *testing.T) {
	t.Parallel()
	s := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	// Keep-alive on, as in production: the second call reuses the first's connection.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	p, err := New(Config{APIKey: "sk_test_effectd", BaseURL: srv.URL, HTTPClient: hc, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Send(ctx, "k:first", json.RawMessage(refundPayload), meta("first")); err != nil {
		t.Fatal(err)
	}
	s.Faults.Set("stripe", sandbox.Fault{DropRate: 1, Times: 1}) // apply, then hang up without an answer, once
	_, err = p.Send(ctx, "k:second", json.RawMessage(refundPayload), meta("second"))
	calls := 0
	for _, c := range s.Ledger.Snapshot("stripe").Calls {
		if c.Key == "k:second" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("one Send reached Stripe %d times (error %v)", calls, err)
	}
	if e := asError(t, err); !e.MaybeSent() || !e.Retryable() {
		t.Errorf("a dropped answer: %v (maybe sent %v, retryable %v), want maybe sent and retryable", e, e.MaybeSent(), e.Retryable())
	}
}
