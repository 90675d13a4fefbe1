package stripesandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emutest"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
)

// TestEvents: a registered endpoint receives every object change as an
// event that stripe-go's webhook package verifies; a refund of
// pi_refund_fails turns failed after succeeding.
func TestEvents(t *testing.T) {
	t.Parallel()
	_, srv, _ := setup(t, 0)
	rcv := emutest.NewReceiver(t, http.StatusOK)
	const secret = "whsec_test"
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"`+rcv.URL+`/in","secret":"`+secret+`"}`))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("register: %v %v", res, err)
	}
	bad, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"nope","secret":"x"}`))
	if res, _ := http.DefaultClient.Do(bad); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad url: %d, want 422", res.StatusCode)
	}

	ok := do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	fails := do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k2", url.Values{"payment_intent": {RefundFailsPI}})
	if fails.body["status"] != "succeeded" {
		t.Fatalf("pi_refund_fails refund starts %v, want succeeded", fails.body["status"])
	}
	// A replay is no change: no event.
	do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)

	got := map[string][]string{}
	for _, r := range rcv.Wait(t, 3) {
		evt, err := stripewebhook.ConstructEvent(r.Body, r.Header.Get("Stripe-Signature"), secret)
		if err != nil {
			t.Fatalf("event does not verify: %v: %s", err, r.Body)
		}
		if _, err := stripewebhook.ConstructEvent(r.Body, r.Header.Get("Stripe-Signature"), "whsec_other"); err == nil {
			t.Fatal("event verifies with another secret")
		}
		id := evt.Data.Object["id"].(string)
		got[id] = append(got[id], string(evt.Type)+":"+evt.Data.Object["status"].(string))
	}
	if fmt.Sprint(got[ok.body["id"].(string)]) != "[refund.created:succeeded]" {
		t.Errorf("refund events: %v", got)
	}
	if fmt.Sprint(got[fails.body["id"].(string)]) != "[refund.created:succeeded refund.updated:failed]" {
		t.Errorf("pi_refund_fails events: %v", got)
	}
	if r := do(t, context.Background(), srv, http.MethodGet, "/v1/refunds/"+fails.body["id"].(string), "", nil); r.body["status"] != "failed" {
		t.Errorf("retrieved after the failure: %v", r.body["status"])
	}
}

// TestEventsRetried: an endpoint that fails gets the event again.
func TestEventsRetried(t *testing.T) {
	t.Parallel()
	s, srv, _ := setup(t, 0)
	rcv := emutest.NewReceiver(t, http.StatusServiceUnavailable)
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"`+rcv.URL+`","secret":"whsec_x"}`))
	http.DefaultClient.Do(req)
	do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	rs := rcv.Wait(t, 2)
	if string(rs[0].Body) != string(rs[1].Body) {
		t.Error("a retry sent another body")
	}
	// The ledger records a try once its answer is read: wait for the second.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.Ledger.Snapshot("stripe").Callbacks) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if cbs := s.Ledger.Snapshot("stripe").Callbacks; len(cbs) < 2 || cbs[1].Try != 2 || cbs[0].Answer != http.StatusServiceUnavailable {
		t.Errorf("ledger callbacks: %+v", cbs)
	}
}
