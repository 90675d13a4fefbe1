package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// setup starts a sandbox and returns it with a Provider pointed at it.
func setup(t *testing.T, opts sandbox.Options) (*sandbox.Server, *Provider) {
	t.Helper()
	s := sandbox.New(opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	// No keep-alive: net/http silently resends a request that carries an
	// Idempotency-Key when a reused connection dies, which would hide drops.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	p, err := New(Config{APIKey: "sk_test_effectd", BaseURL: srv.URL, HTTPClient: hc, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func meta(event string) map[string]string {
	return map[string]string{effect.MetaEventID: event, effect.MetaIntentID: "42"}
}

const refundPayload = `{"type":"refund","payment_intent":"pi_123","amount":500,"reason":"requested_by_customer"}`

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *stripe.Error", err, err)
	}
	return e
}

func TestSendEachType(t *testing.T) {
	t.Parallel()
	s, p := setup(t, sandbox.Options{})
	for _, tc := range []struct{ payload, prefix, field string }{
		{refundPayload, "re_", `"payment_intent":"pi_123"`},
		{`{"type":"refund","charge":"ch_9"}`, "re_", `"charge":"ch_9"`},
		{`{"type":"payment_intent","amount":1200,"currency":"EUR","customer":"cus_1","payment_method":"pm_card_visa","confirm":true,"off_session":true}`, "pi_", `"status":"succeeded"`},
		{`{"type":"transfer","amount":700,"currency":"usd","destination":"acct_1"}`, "tr_", `"transfer_group":"evt-`},
	} {
		key := "ch:evt-" + tc.prefix + tc.field
		for range 2 { // the second call is replayed from the key
			ref, err := p.Send(context.Background(), key, json.RawMessage(tc.payload), meta("evt-"+tc.prefix))
			if err != nil {
				t.Fatalf("%s: %v", tc.payload, err)
			}
			if !strings.HasPrefix(ref, tc.prefix) {
				t.Errorf("%s: ref %q, want prefix %q", tc.payload, ref, tc.prefix)
			}
		}
		if n := s.Ledger.Applied("stripe", key); n != 1 {
			t.Errorf("%s: applied %d times, want 1", tc.payload, n)
		}
		var body string
		for _, e := range s.Ledger.Snapshot("stripe").Effects {
			if e.Key == key {
				body = string(e.Body)
			}
		}
		for _, want := range []string{tc.field, `"effectd_event_id":"evt-` + tc.prefix + `"`, `"effectd_intent_id":"42"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: created object %s lacks %s", tc.payload, body, want)
			}
		}
	}
	if n := len(s.Ledger.Snapshot("stripe").Effects); n != 4 {
		t.Errorf("%d effects, want 4", n)
	}
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		fault      sandbox.Fault
		status     int
		retryable  bool
		maybeSent  bool
		retryAfter time.Duration
	}{
		{"500 saved", sandbox.Fault{ErrorRate: 1, ErrorStatus: 500}, 500, true, false, 0},
		{"503 retry-after", sandbox.Fault{ErrorRate: 1, ErrorStatus: 503, RetryAfter: 7}, 503, true, false, 7 * time.Second},
		{"429", sandbox.Fault{ErrorRate: 1, ErrorStatus: 429}, 429, true, false, 0},
		{"409", sandbox.Fault{ErrorRate: 1, ErrorStatus: 409}, 409, true, false, 0},
		{"400", sandbox.Fault{ErrorRate: 1, ErrorStatus: 400}, 400, false, false, 0},
		{"402 declined", sandbox.Fault{ErrorRate: 1, ErrorStatus: 402}, 402, false, false, 0},
		{"403", sandbox.Fault{ErrorRate: 1, ErrorStatus: 403}, 403, false, false, 0},
		{"404", sandbox.Fault{ErrorRate: 1, ErrorStatus: 404}, 404, false, false, 0},
		{"drop after apply", sandbox.Fault{DropRate: 1}, 0, true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, p := setup(t, sandbox.Options{})
			s.Faults.Set("stripe", tc.fault)
			_, err := p.Send(context.Background(), "k:"+tc.name, json.RawMessage(refundPayload), meta(tc.name))
			e := asError(t, err)
			if e.Status != tc.status || e.Retryable() != tc.retryable || e.MaybeSent() != tc.maybeSent || e.RetryAfter() != tc.retryAfter {
				t.Errorf("got status %d retryable %v maybeSent %v retryAfter %v (%v); want %d %v %v %v",
					e.Status, e.Retryable(), e.MaybeSent(), e.RetryAfter(), e, tc.status, tc.retryable, tc.maybeSent, tc.retryAfter)
			}
			wantApplied := 0
			if tc.maybeSent {
				wantApplied = 1
			}
			if n := s.Ledger.Applied("stripe", "k:"+tc.name); n != wantApplied {
				t.Errorf("applied %d, want %d", n, wantApplied)
			}
		})
	}
}

func TestErrorIdempotencyKeyReused(t *testing.T) {
	t.Parallel()
	s, p := setup(t, sandbox.Options{})
	if _, err := p.Send(context.Background(), "k:reuse", json.RawMessage(refundPayload), meta("e1")); err != nil {
		t.Fatal(err)
	}
	_, err := p.Send(context.Background(), "k:reuse", json.RawMessage(`{"type":"refund","payment_intent":"pi_123","amount":501}`), meta("e1"))
	e := asError(t, err)
	if e.Status != 400 || e.Type != "idempotency_error" || e.Retryable() || e.MaybeSent() {
		t.Fatalf("got %v retryable %v maybeSent %v; want a permanent 400 idempotency_error", e, e.Retryable(), e.MaybeSent())
	}
	if !strings.Contains(e.Error(), "IDEMPOTENCY KEY REUSED") {
		t.Errorf("message %q is not loud", e.Error())
	}
	if n := s.Ledger.Applied("stripe", "k:reuse"); n != 1 {
		t.Errorf("applied %d, want 1", n)
	}
}

func TestErrorKeyInUse(t *testing.T) {
	t.Parallel()
	s, p := setup(t, sandbox.Options{})
	// Whichever request registers the key first waits out the latency; the
	// other is refused at once with 409.
	s.Faults.Set("stripe", sandbox.Fault{Latency: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := p.Send(ctx, "k:busy", json.RawMessage(refundPayload), meta("busy"))
			errs <- err
		}()
	}
	e := asError(t, <-errs)
	if e.Status != http.StatusConflict || e.Code != "idempotency_key_in_use" || !e.Retryable() || e.MaybeSent() {
		t.Fatalf("got %v retryable %v maybeSent %v; want a retryable 409 idempotency_key_in_use", e, e.Retryable(), e.MaybeSent())
	}
	cancel()
	<-errs
}

func TestErrorShouldRetryHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		header    string
		retryable bool
	}{
		{400, "true", true},
		{500, "false", false},
		{503, "", true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.header != "" {
				w.Header().Set("Stripe-Should-Retry", tc.header)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			w.Write([]byte(`{"error":{"type":"api_error","message":"test"}}`))
		}))
		p, err := New(Config{APIKey: "sk_test_x", BaseURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(context.Background(), "k", json.RawMessage(refundPayload), meta("e"))
		srv.Close()
		if e := asError(t, err); e.Status != tc.status || e.Retryable() != tc.retryable || e.MaybeSent() {
			t.Errorf("%d Stripe-Should-Retry %q: got %v retryable %v maybeSent %v", tc.status, tc.header, e, e.Retryable(), e.MaybeSent())
		}
	}
}

func TestErrorNonJSONBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer srv.Close()
	p, _ := New(Config{APIKey: "sk_test_x", BaseURL: srv.URL})
	_, err := p.Send(context.Background(), "k", json.RawMessage(refundPayload), meta("e"))
	if e := asError(t, err); e.Status != 502 || !e.Retryable() {
		t.Errorf("got %v status %d retryable %v; want retryable 502", e, e.Status, e.Retryable())
	}
}

func TestErrorTransport(t *testing.T) {
	t.Parallel()
	t.Run("unauthorized", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(sandbox.New(sandbox.Options{}).Handler())
		defer srv.Close()
		p, _ := New(Config{APIKey: "rk_live_wrong", BaseURL: srv.URL})
		_, err := p.Send(context.Background(), "k", json.RawMessage(refundPayload), meta("e"))
		if e := asError(t, err); e.Status != 401 || e.Retryable() || e.MaybeSent() {
			t.Errorf("got %v; want a permanent 401", e)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		p, _ := New(Config{APIKey: "sk_test_x", BaseURL: url})
		_, err := p.Send(context.Background(), "k", json.RawMessage(refundPayload), meta("e"))
		if e := asError(t, err); e.Status != 0 || !e.Retryable() || e.MaybeSent() {
			t.Errorf("got %v retryable %v maybeSent %v; want retryable, not sent", e, e.Retryable(), e.MaybeSent())
		}
	})
	t.Run("timeout after write", func(t *testing.T) {
		t.Parallel()
		s := sandbox.New(sandbox.Options{})
		s.Faults.Set("stripe", sandbox.Fault{HangRate: 1})
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		// Long enough for the request to be written even on a loaded machine:
		// a deadline that fires before the write is (rightly) not maybe-sent.
		p, _ := New(Config{APIKey: "sk_test_x", BaseURL: srv.URL, Timeout: 2 * time.Second})
		_, err := p.Send(context.Background(), "k", json.RawMessage(refundPayload), meta("e"))
		e := asError(t, err)
		if !e.Retryable() || !e.MaybeSent() || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v retryable %v maybeSent %v; want a retryable, maybe-sent deadline", e, e.Retryable(), e.MaybeSent())
		}
	})
	t.Run("unknown type", func(t *testing.T) {
		t.Parallel()
		_, p := setup(t, sandbox.Options{})
		_, err := p.Send(context.Background(), "k", json.RawMessage(`{"type":"payout","amount":1}`), meta("e"))
		if e := asError(t, err); e.Retryable() || e.MaybeSent() || !strings.Contains(e.Error(), "payload.type") {
			t.Errorf("got %v; want a permanent error naming payload.type", e)
		}
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	p, err := New(Config{APIKey: "sk_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	for payload, field := range map[string]string{
		`{"type":"refund"}`:                                                   "payload.payment_intent",
		`{"type":"refund","charge":"ch_1","amount":0}`:                        "payload.amount",
		`{"type":"refund","charge":"ch_1","amont":5}`:                         "payload.amont",
		`{"type":"refund","charge":"ch_1","AMOUNT":-5}`:                       "payload.AMOUNT",
		`{"type":"refund","charge":"ch_1","amount":1.0}`:                      "payload.amount",
		`{"type":"refund","charge":"ch_1","amount":1e30}`:                     "payload.amount",
		`{"type":"refund","charge":"ch_1","currency":"usd"}`:                  "payload.currency",
		`{"type":"refund","charge":"ch 1"}`:                                   "payload.charge",
		`{"type":"payment_intent","amount":5,"currency":"dollars"}`:           "payload.currency",
		`{"type":"payment_intent","amount":5,"currency":"usd","confirm":"y"}`: "payload.confirm",
		`{"type":"payment_intent","amount":5,"currency":"usd","metadata":{}}`: "payload.metadata",
		`{"type":"payment_intent","amount":5}`:                                "payload.currency",
		`{"type":"transfer","amount":5,"currency":"usd"}`:                     "payload.destination",
		`{"type":"transfer","currency":"usd","destination":"a"}`:              "payload.amount",
		`{"amount":5}`: "payload.type",
		`[]`:           "payload",
		`{"type":"refund","charge":"ch_1","reason":"because"}`: "payload.reason",
	} {
		if err := p.Validate(json.RawMessage(payload)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate(%s) = %v, want an error naming %s", payload, err, field)
		}
	}
	if err := p.Validate(json.RawMessage(refundPayload)); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}

func TestNewNamesField(t *testing.T) {
	t.Parallel()
	for cfg, field := range map[Config]string{
		{}: "stripe.api_key",
		{APIKey: "sk_test_x", BaseURL: "ftp://x"}: "stripe.base_url",
		{APIKey: "sk_test_x", Timeout: -1}:        "stripe.timeout",
	} {
		if _, err := New(cfg); err == nil || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", cfg, err, field)
		}
	}
}

func TestLookupReplayAfterDrop(t *testing.T) {
	t.Parallel()
	s, p := setup(t, sandbox.Options{})
	s.Faults.Set("stripe", sandbox.Fault{DropRate: 1})
	_, err := p.Send(context.Background(), "k:drop", json.RawMessage(refundPayload), meta("drop"))
	if e := asError(t, err); !e.MaybeSent() {
		t.Fatalf("send with a dropped response: %v, want maybe sent", e)
	}
	s.Faults.Set("stripe", sandbox.Fault{})
	ref, found, err := p.Lookup(context.Background(), "k:drop", json.RawMessage(refundPayload), meta("drop"), time.Now().Add(-time.Minute), time.Now())
	if err != nil || !found {
		t.Fatalf("Lookup = %q, %v, %v; want found", ref, found, err)
	}
	effects := s.Ledger.Snapshot("stripe").Effects
	if len(effects) != 1 || effects[0].Ref != ref || effects[0].Applied != 1 {
		t.Fatalf("ledger effects %+v, want one refund %s applied once", effects, ref)
	}
}

func TestLookupReplayOfSavedError(t *testing.T) {
	t.Parallel()
	s, p := setup(t, sandbox.Options{})
	s.Faults.Set("stripe", sandbox.Fault{ErrorRate: 1, ErrorStatus: 500})
	if _, err := p.Send(context.Background(), "k:500", json.RawMessage(refundPayload), meta("e500")); err == nil {
		t.Fatal("send succeeded through an injected 500")
	}
	s.Faults.Set("stripe", sandbox.Fault{})
	ref, found, err := p.Lookup(context.Background(), "k:500", json.RawMessage(refundPayload), meta("e500"), time.Now(), time.Now())
	if err != nil || found {
		t.Fatalf("Lookup = %q, %v, %v; want absent (the saved 500 replays)", ref, found, err)
	}
	if n := len(s.Ledger.Snapshot("stripe").Effects); n != 0 {
		t.Errorf("%d effects, want 0", n)
	}
	// A 409 while the first request still runs cannot tell.
	s.Faults.Set("stripe", sandbox.Fault{ErrorRate: 1, ErrorStatus: 503})
	if _, _, err := p.Lookup(context.Background(), "k:503", json.RawMessage(refundPayload), meta("e503"), time.Now(), time.Now()); err == nil {
		t.Error("Lookup answered through a fresh 503, want an error")
	}
}

func TestLookupPastWindow(t *testing.T) {
	t.Parallel()
	// Keys expire at once, and the intents claim to be two days old: Lookup
	// must list rather than replay.
	s, p := setup(t, sandbox.Options{StripeKeyWindow: time.Nanosecond})
	old := time.Now().Add(-48 * time.Hour)
	ctx := context.Background()
	send := func(key, payload, event string) string {
		t.Helper()
		ref, err := p.Send(ctx, key, json.RawMessage(payload), meta(event))
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	lookup := func(key, payload, event string) (string, bool, error) {
		t.Helper()
		return p.Lookup(ctx, key, json.RawMessage(payload), meta(event), old, old)
	}
	// Other refunds of the same payment intent do not match.
	send("k:other", refundPayload, "other")
	want := send("k:mine", refundPayload, "mine")
	transfer := `{"type":"transfer","amount":700,"currency":"usd","destination":"acct_1"}`
	wantTr := send("k:tr", transfer, "tr-event")
	pi := `{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_7"}`
	wantPI := send("k:pi", pi, "pi-event")
	piNoCustomer := `{"type":"payment_intent","amount":1200,"currency":"usd"}`
	wantSearch := send("k:pi2", piNoCustomer, "pi2-event")
	calls := len(s.Ledger.Snapshot("stripe").Calls)

	for _, tc := range []struct {
		payload, event, want string
		found, err           bool
	}{
		{refundPayload, "mine", want, true, false},
		{refundPayload, "never-sent", "", false, false},
		{transfer, "tr-event", wantTr, true, false},
		{transfer, "never-sent", "", false, false},
		{pi, "pi-event", wantPI, true, false},
		{pi, "never-sent", "", false, false},
		{piNoCustomer, "pi2-event", wantSearch, true, false},
		{piNoCustomer, "never-sent", "", false, true}, // a search miss proves nothing
	} {
		ref, found, err := lookup("k:"+tc.event, tc.payload, tc.event)
		if ref != tc.want || found != tc.found || (err != nil) != tc.err {
			t.Errorf("Lookup(%s, %s) = %q, %v, %v; want %q, %v, error %v", tc.payload, tc.event, ref, found, err, tc.want, tc.found, tc.err)
		}
	}
	snap := s.Ledger.Snapshot("stripe")
	for _, c := range snap.Calls[calls:] {
		if c.Method != http.MethodGet {
			t.Errorf("lookup past the window sent %s %s", c.Method, c.Path)
		}
	}

	// Two refunds stamped with one event: ambiguous.
	send("k:dup1", refundPayload, "dup")
	send("k:dup2", refundPayload, "dup")
	if _, _, err := lookup("k:dup1", refundPayload, "dup"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("Lookup of a duplicated event = %v, want an ambiguity error", err)
	}
}
