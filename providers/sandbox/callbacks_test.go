package sandbox

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
	"github.com/twilio/twilio-go/client"
)

// receiver collects what the sandbox POSTs to it.
type receiver struct {
	mu   sync.Mutex
	reqs []received
	srv  *httptest.Server
	got  chan struct{}
}

type received struct {
	header http.Header
	body   []byte
	url    string
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{got: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, received{header: req.Header.Clone(), body: b, url: "http://" + req.Host + req.URL.RequestURI()})
		r.mu.Unlock()
		w.WriteHeader(status)
		r.got <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// until returns once cond holds, checked after each request, or fails after a deadline.
func (r *receiver) until(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-r.got:
		case <-deadline:
			t.Fatal("the expected requests did not arrive")
		}
	}
}

// wait returns once n requests arrived, or fails after a deadline.
func (r *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	r.until(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.reqs) >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

// TestTwilioStatusCallbacks: each status is POSTed to the StatusCallback,
// signed with the auth token as twilio-go's validator expects; the magic
// undeliverable number ends undelivered with 30003.
func TestTwilioStatusCallbacks(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	s.SetTwilioQueueDelay(50 * time.Millisecond)
	s.SetTwilioDeliveryDelay(50 * time.Millisecond)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	rcv := newReceiver(t, http.StatusNoContent)
	validator := client.NewRequestValidator("token") // twilioCallErr authenticates with "token"

	for _, c := range []struct {
		to    string
		final string
		code  string
	}{{"+15551234567", "delivered", ""}, {TwilioUndeliveredNumber, "undelivered", "30003"}} {
		cb := rcv.srv.URL + "/cb?effectd_intent_id=7"
		form := twilioSendForm(c.to, "hi")
		form.Set("StatusCallback", cb)
		code, msg, _ := twilioCall(t, ts, http.MethodPost, twilioMessagesPath, form)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, msg)
		}
		sid := msg["sid"].(string)
		var statuses []string
		rcv.until(t, func() bool { return len(allFor(rcv, sid)) >= 3 })
		for _, r := range allFor(rcv, sid) {
			vals, _ := url.ParseQuery(string(r.body))
			params := map[string]string{}
			for k := range vals {
				params[k] = vals.Get(k)
			}
			if !validator.Validate(cb, params, r.header.Get("X-Twilio-Signature")) {
				t.Errorf("%s %s: signature does not validate", sid, vals.Get("MessageStatus"))
			}
			if other := client.NewRequestValidator("other"); other.Validate(cb, params, r.header.Get("X-Twilio-Signature")) {
				t.Errorf("signature validates with another token")
			}
			statuses = append(statuses, vals.Get("MessageStatus")+vals.Get("ErrorCode"))
		}
		if want := fmt.Sprint([]string{"queued", "sent", c.final + c.code}); fmt.Sprint(statuses) != want {
			t.Errorf("%s: callbacks %v, want %s", c.to, statuses, want)
		}
		_, m, _ := twilioCall(t, ts, http.MethodGet, "/2010-04-01/Accounts/ACtest/Messages/"+sid+".json", nil)
		if m["status"] != c.final || fmt.Sprint(m["error_code"]) != map[string]string{"": "<nil>", "30003": "30003"}[c.code] {
			t.Errorf("%s: fetched %v %v, want %s %s", c.to, m["status"], m["error_code"], c.final, c.code)
		}
	}
	// The ledger records a callback once its answer is in, which can be just
	// after the receiver has seen it: poll, with a deadline.
	callbacks := func() int { return len(s.Ledger.Snapshot("twilio").Callbacks) }
	for deadline := time.Now().Add(10 * time.Second); callbacks() < 6 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := callbacks(); n != 6 {
		t.Errorf("ledger callbacks = %d, want 6", n)
	}
}

func allFor(r *receiver, sid string) []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, x := range r.reqs {
		if strings.Contains(string(x.body), "MessageSid="+sid) {
			out = append(out, x)
		}
	}
	return out
}

// TestStripeEvents: a registered endpoint receives every object change as an
// event that stripe-go's webhook package verifies; a refund of
// pi_refund_fails turns failed after succeeding.
func TestStripeEvents(t *testing.T) {
	t.Parallel()
	_, srv, _ := stripeSetup(t, Options{})
	rcv := newReceiver(t, http.StatusOK)
	const secret = "whsec_test"
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"`+rcv.srv.URL+`/in","secret":"`+secret+`"}`))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("register: %v %v", res, err)
	}
	bad, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"nope","secret":"x"}`))
	if res, _ := http.DefaultClient.Do(bad); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad url: %d, want 422", res.StatusCode)
	}

	ok := stripeDo(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	fails := stripeDo(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k2", url.Values{"payment_intent": {StripeRefundFailsPI}})
	if fails.body["status"] != "succeeded" {
		t.Fatalf("pi_refund_fails refund starts %v, want succeeded", fails.body["status"])
	}
	// A replay is no change: no event.
	stripeDo(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)

	got := map[string][]string{}
	for _, r := range rcv.wait(t, 3) {
		evt, err := stripewebhook.ConstructEvent(r.body, r.header.Get("Stripe-Signature"), secret)
		if err != nil {
			t.Fatalf("event does not verify: %v: %s", err, r.body)
		}
		if _, err := stripewebhook.ConstructEvent(r.body, r.header.Get("Stripe-Signature"), "whsec_other"); err == nil {
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
	if r := stripeDo(t, context.Background(), srv, http.MethodGet, "/v1/refunds/"+fails.body["id"].(string), "", nil); r.body["status"] != "failed" {
		t.Errorf("retrieved after the failure: %v", r.body["status"])
	}
}

// TestStripeEventsRetried: an endpoint that fails gets the event again.
func TestStripeEventsRetried(t *testing.T) {
	t.Parallel()
	s, srv, _ := stripeSetup(t, Options{})
	rcv := newReceiver(t, http.StatusServiceUnavailable)
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/_sandbox/stripe/webhook", strings.NewReader(`{"url":"`+rcv.srv.URL+`","secret":"whsec_x"}`))
	http.DefaultClient.Do(req)
	stripeDo(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	rs := rcv.wait(t, 2)
	if string(rs[0].body) != string(rs[1].body) {
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
