package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	stripeapi "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/effectd/effectd/api/ingress"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/openapitest"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/statemachine"
)

// recorder keeps the events handed to it.
type recorder struct {
	mu   sync.Mutex
	evs  []dispatcher.ProviderEvent
	fail error
}

func (r *recorder) RecordEvent(_ context.Context, ev dispatcher.ProviderEvent) (dispatcher.EventResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return dispatcher.EventResult{}, r.fail
	}
	r.evs = append(r.evs, ev)
	return dispatcher.EventResult{IntentID: ev.IntentID, Outcome: dispatcher.EventApplied, To: ev.Delivery}, nil
}

func (r *recorder) events() []dispatcher.ProviderEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dispatcher.ProviderEvent(nil), r.evs...)
}

const (
	authToken    = "token123"
	callbackURL  = "https://effectd.example.com/ingress/twilio/sms"
	stripeSecret = "whsec_test_secret"
)

// logBuffer collects the handler's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func setup(t *testing.T) (*httptest.Server, *recorder, *prometheus.Registry, *logBuffer) {
	t.Helper()
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	h, err := ingress.NewHandler(ingress.Config{
		Channels: []ingress.Channel{
			{Name: "sms", Provider: "twilio", TwilioAuthToken: authToken, StatusCallback: callbackURL},
			{Name: "refund", Provider: "stripe", StripeSecret: stripeSecret},
		},
		Recorder: rec, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, rec, reg, logs
}

// spec is openapi.yaml, loaded once for every test's answers.
var spec = sync.OnceValues(func() (*openapitest.Spec, error) { return openapitest.Read("openapi.yaml") })

// post sends body to target and returns the status and the decoded answer,
// after checking the answer against openapi.yaml.
func post(t *testing.T, target string, header http.Header, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckResponse(req, res.StatusCode, res.Header, b); err != nil {
		t.Errorf("the answer does not match openapi.yaml: %v", err)
	}
	var out map[string]any
	json.Unmarshal(b, &out)
	return res.StatusCode, out
}

func twilioForm(sid, status, code string) url.Values {
	f := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {status}, "AccountSid": {"AC1"}, "To": {"+15558675310"}}
	if code != "" {
		f.Set("ErrorCode", code)
	}
	return f
}

func TestTwilioCallbacks(t *testing.T) {
	t.Parallel()
	srv, rec, reg, _ := setup(t)
	query := "?effectd_event_id=ord-1&effectd_intent_id=42"
	signed := func(f url.Values, token, signedURL string) http.Header {
		return http.Header{
			"Content-Type":       {"application/x-www-form-urlencoded"},
			"X-Twilio-Signature": {sandbox.TwilioSignature(token, signedURL, f)},
		}
	}
	good := twilioForm("SM1", "undelivered", "30003")
	if code, body := post(t, srv.URL+"/ingress/twilio/sms"+query, signed(good, authToken, callbackURL+query), good.Encode()); code != http.StatusOK {
		t.Fatalf("good callback: %d %v", code, body)
	}
	evs := rec.events()
	if len(evs) != 1 {
		t.Fatalf("recorded %d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.EventID != "SM1:undelivered" || ev.IntentID != 42 || ev.IntentEventID != "ord-1" || ev.ObjectRef != "SM1" || ev.Delivery != statemachine.Undelivered ||
		ev.Detail != "undelivered 30003" || ev.Channel != "sms" || strings.Contains(string(ev.Payload), "+1555") {
		t.Fatalf("event: %+v payload %s", ev, ev.Payload)
	}

	forged := []struct {
		name   string
		header http.Header
		body   string
		target string
	}{
		{"no signature", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, good.Encode(), query},
		{"another token", signed(good, "othertoken", callbackURL+query), good.Encode(), query},
		{"another intent", signed(good, authToken, callbackURL+query), good.Encode(), "?effectd_event_id=ord-1&effectd_intent_id=43"},
		{"another event", signed(good, authToken, callbackURL+query), good.Encode(), "?effectd_event_id=ord-2&effectd_intent_id=42"},
		{"changed status", signed(good, authToken, callbackURL+query), twilioForm("SM1", "delivered", "").Encode(), query},
		{"signed for the listener's own address", signed(good, authToken, srv.URL+"/ingress/twilio/sms"+query), good.Encode(), query},
	}
	for _, f := range forged {
		if code, body := post(t, srv.URL+"/ingress/twilio/sms"+f.target, f.header, f.body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", f.name, code, body)
		}
	}
	if n := len(rec.events()); n != 1 {
		t.Fatalf("forged callbacks reached the recorder: %d events", n)
	}
	if code, _ := post(t, srv.URL+"/ingress/twilio/nope"+query, signed(good, authToken, callbackURL+query), good.Encode()); code != http.StatusNotFound {
		t.Errorf("unknown channel: %d, want 404", code)
	}
	if code, _ := post(t, srv.URL+"/ingress/twilio/refund"+query, signed(good, authToken, callbackURL+query), good.Encode()); code != http.StatusNotFound {
		t.Errorf("a stripe channel on the twilio route: %d, want 404", code)
	}
	if got := counter(t, reg, "twilio", "bad_signature"); got != 6 {
		t.Errorf("bad_signature = %v, want 6", got)
	}
}

func stripeEvent(id, typ, version string, obj map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": version,
		"created": time.Now().Unix(), "data": map[string]any{"object": obj}})
	return b
}

func TestStripeEvents(t *testing.T) {
	t.Parallel()
	srv, rec, reg, _ := setup(t)
	sign := func(b []byte, secret string, at time.Time) http.Header {
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: b, Secret: secret, Timestamp: at})
		return http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {p.Header}}
	}
	refund := map[string]any{"id": "re_1", "object": "refund", "status": "failed", "failure_reason": "expired_or_canceled_card",
		"metadata": map[string]any{"effectd_intent_id": "7", "effectd_event_id": "e"}}
	b := stripeEvent("evt_1", "refund.updated", stripeapi.APIVersion, refund)
	if code, body := post(t, srv.URL+"/ingress/stripe/refund", sign(b, stripeSecret, time.Now()), string(b)); code != http.StatusOK {
		t.Fatalf("good event: %d %v", code, body)
	}
	// Another API version is accepted, and counted.
	other := stripeEvent("evt_2", "refund.updated", "2020-08-27", refund)
	if code, body := post(t, srv.URL+"/ingress/stripe/refund", sign(other, stripeSecret, time.Now()), string(other)); code != http.StatusOK {
		t.Fatalf("event of another API version: %d %v", code, body)
	}
	evs := rec.events()
	if len(evs) != 2 {
		t.Fatalf("recorded %d events, want 2", len(evs))
	}
	if ev := evs[0]; ev.EventID != "evt_1" || ev.IntentID != 7 || ev.IntentEventID != "e" || ev.ObjectRef != "re_1" || ev.Delivery != statemachine.Undelivered ||
		!ev.Reversal || ev.Detail != "failed expired_or_canceled_card" || ev.Type != "refund.updated" {
		t.Fatalf("event: %+v", ev)
	}
	if got := counter(t, reg, "stripe", "api_version_mismatch"); got != 1 {
		t.Errorf("api_version_mismatch = %v, want 1", got)
	}

	for name, h := range map[string]http.Header{
		"no signature":   {"Content-Type": {"application/json"}},
		"another secret": sign(b, "whsec_other", time.Now()),
		"too old":        sign(b, stripeSecret, time.Now().Add(-time.Hour)),
	} {
		if code, body := post(t, srv.URL+"/ingress/stripe/refund", h, string(b)); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", name, code, body)
		}
	}
	tampered := sign(b, stripeSecret, time.Now())
	if code, _ := post(t, srv.URL+"/ingress/stripe/refund", tampered, strings.Replace(string(b), "failed", "succeeded", 1)); code != http.StatusBadRequest {
		t.Errorf("tampered body: %d, want 400", code)
	}
	if n := len(rec.events()); n != 2 {
		t.Fatalf("refused events reached the recorder: %d", n)
	}

	// A store that fails answers 503, so that Stripe retries.
	rec.mu.Lock()
	rec.fail = errors.New("database down")
	rec.mu.Unlock()
	b3 := stripeEvent("evt_3", "refund.updated", stripeapi.APIVersion, refund)
	if code, _ := post(t, srv.URL+"/ingress/stripe/refund", sign(b3, stripeSecret, time.Now()), string(b3)); code != http.StatusServiceUnavailable {
		t.Errorf("store down: %d, want 503", code)
	}
}

// counter reads effectd_ingress_events_total{provider, result} from reg.
func counter(t *testing.T, reg *prometheus.Registry, provider, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "effectd_ingress_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestMethodNotAllowed: a method a route does not take answers 405 naming the
// methods it takes in Allow; an unknown path 404; both with an error body.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	srv, rec, _, _ := setup(t)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/ingress/twilio/sms", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPut, "/ingress/stripe/refund", http.StatusMethodNotAllowed, "POST"},
		{http.MethodDelete, "/ingress/stripe/nope", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "GET"},
		{http.MethodGet, "/ingress/webhook/sms", http.StatusNotFound, ""},
		{http.MethodPost, "/nope", http.StatusNotFound, ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("MessageSid=SM1"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(b, &e)
		wantCode := map[int]string{http.StatusMethodNotAllowed: "method_not_allowed", http.StatusNotFound: "not_found"}[tc.status]
		if res.StatusCode != tc.status || res.Header.Get("Allow") != tc.allow || e.Error.Code != wantCode || e.Error.Message == "" {
			t.Errorf("%s %s: %d Allow %q %s, want %d Allow %q code %s", tc.method, tc.path, res.StatusCode,
				res.Header.Get("Allow"), b, tc.status, tc.allow, wantCode)
		}
	}
	if n := len(rec.events()); n != 0 {
		t.Errorf("%d events recorded", n)
	}
}

// TestSignedButMalformed: a body whose signature is valid but that is not an
// event effectd can read is refused as malformed, in the answer, the metric
// and the log, never as bad_signature; nothing is recorded.
func TestSignedButMalformed(t *testing.T) {
	t.Parallel()
	srv, rec, reg, logs := setup(t)
	stripeSigned := func(body string) http.Header {
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: stripeSecret, Timestamp: time.Now()})
		return http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {p.Header}}
	}
	query := "?effectd_intent_id=42"
	// A form with one field that is not form-encoded: signed over the fields
	// that are, as Twilio would sign what it sent.
	readable := twilioForm("SM1", "delivered", "")
	twilioSigned := http.Header{"Content-Type": {"application/x-www-form-urlencoded"},
		"X-Twilio-Signature": {sandbox.TwilioSignature(authToken, callbackURL+query, readable)}}

	for _, tc := range []struct {
		name, target string
		header       http.Header
		body         string
	}{
		{"stripe: not JSON", "/ingress/stripe/refund", stripeSigned(`not json`), `not json`},
		{"stripe: data.object not an object", "/ingress/stripe/refund", stripeSigned(`{"id":"evt_1","type":"refund.updated","data":{"object":"re_1"}}`),
			`{"id":"evt_1","type":"refund.updated","data":{"object":"re_1"}}`},
		{"stripe: no id", "/ingress/stripe/refund", stripeSigned(`{"type":"refund.updated","data":{"object":{}}}`), `{"type":"refund.updated","data":{"object":{}}}`},
		{"twilio: not a form", "/ingress/twilio/sms" + query, twilioSigned, readable.Encode() + "&Bad=%zz"},
		{"twilio: no MessageStatus", "/ingress/twilio/sms" + query,
			http.Header{"X-Twilio-Signature": {sandbox.TwilioSignature(authToken, callbackURL+query, url.Values{"MessageSid": {"SM1"}})}}, "MessageSid=SM1"},
	} {
		code, body := post(t, srv.URL+tc.target, tc.header, tc.body)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusBadRequest || e["code"] != "malformed" {
			t.Errorf("%s: %d %v, want 400 malformed", tc.name, code, body)
		}
	}
	if n := len(rec.events()); n != 0 {
		t.Errorf("malformed events reached the recorder: %d", n)
	}
	for _, provider := range []string{"stripe", "twilio"} {
		if got := counter(t, reg, provider, "bad_signature"); got != 0 {
			t.Errorf("%s bad_signature = %v, want 0", provider, got)
		}
	}
	if got := counter(t, reg, "stripe", "api_version_mismatch"); got != 0 {
		t.Errorf("api_version_mismatch = %v, want 0: a malformed event has no version to compare", got)
	}
	if got := counter(t, reg, "stripe", "malformed") + counter(t, reg, "twilio", "malformed"); got != 5 {
		t.Errorf("malformed = %v, want 5", got)
	}
	if log := logs.String(); strings.Count(log, "event refused: malformed") != 5 || strings.Contains(log, "signature") {
		t.Errorf("log, want 5 lines of malformed and none of signatures:\n%s", log)
	}

	// Unsigned, the same bodies are refused as bad_signature.
	if code, body := post(t, srv.URL+"/ingress/twilio/sms"+query, http.Header{"X-Twilio-Signature": {"forged"}}, readable.Encode()+"&Bad=%zz"); code != http.StatusBadRequest ||
		body["error"].(map[string]any)["code"] != "bad_signature" {
		t.Errorf("forged, not a form: %d %v, want 400 bad_signature", code, body)
	}
	if code, body := post(t, srv.URL+"/ingress/stripe/refund", http.Header{"Stripe-Signature": {"t=1,v1=00"}}, "not json"); code != http.StatusBadRequest ||
		body["error"].(map[string]any)["code"] != "bad_signature" {
		t.Errorf("forged, not JSON: %d %v, want 400 bad_signature", code, body)
	}
}

// TestOutcomeWithoutDelivery: an event about an intent whose delivery is not
// known answers delivery null, as openapi.yaml says (post checks it).
func TestOutcomeWithoutDelivery(t *testing.T) {
	t.Parallel()
	srv, _, _, _ := setup(t)
	query := "?effectd_intent_id=42"
	f := twilioForm("SM1", "receiving", "")
	h := http.Header{"X-Twilio-Signature": {sandbox.TwilioSignature(authToken, callbackURL+query, f)}}
	code, body := post(t, srv.URL+"/ingress/twilio/sms"+query, h, f.Encode())
	if d, ok := body["delivery"]; code != http.StatusOK || !ok || d != nil || body["intent_id"] != float64(42) {
		t.Errorf("%d %v, want 200 with intent_id 42 and delivery null", code, body)
	}
}
