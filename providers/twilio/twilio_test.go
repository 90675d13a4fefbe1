package twilio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/twilio"
)

var (
	_ dispatcher.Provider = (*twilio.Provider)(nil)
	_ dispatcher.Looker   = (*twilio.Provider)(nil)
)

const (
	testAccount = "AC0123456789abcdef0123456789abcdef"
	testFrom    = "+15005550006"
	testTo      = "+15551234567"
)

// setup starts a sandbox and returns a provider pointed at it; edit adjusts the
// configuration first.
func setup(t *testing.T, edit func(*twilio.Config)) (*twilio.Provider, *sandbox.Server) {
	t.Helper()
	s := sandbox.New(sandbox.Options{})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	cfg := twilio.Config{AccountSID: testAccount, AuthToken: "secret", From: testFrom, BaseURL: ts.URL, Timeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	p, err := twilio.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

func sms(to, body string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"to": to, "body": body})
	return b
}

var meta = map[string]string{effect.MetaEventID: "ev-1", effect.MetaIntentID: "42"}

// twilioError asserts err is a *twilio.Error and returns it.
func twilioError(t *testing.T, err error) *twilio.Error {
	t.Helper()
	var te *twilio.Error
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want *twilio.Error", err, err)
	}
	return te
}

func TestNew(t *testing.T) {
	t.Parallel()
	ok := twilio.Config{AccountSID: testAccount, AuthToken: "secret", From: testFrom}
	tests := []struct {
		name  string
		edit  func(*twilio.Config)
		field string // "" = valid
	}{
		{"valid", func(*twilio.Config) {}, ""},
		{"messaging service only", func(c *twilio.Config) { c.From, c.MessagingServiceSID = "", "MG1" }, ""},
		{"no account", func(c *twilio.Config) { c.AccountSID = "" }, "twilio.account_sid"},
		{"bad account", func(c *twilio.Config) { c.AccountSID = "SK0123" }, "twilio.account_sid"},
		{"no token", func(c *twilio.Config) { c.AuthToken = "" }, "twilio.auth_token"},
		{"token with symbols", func(c *twilio.Config) { c.AuthToken = "a:b" }, "twilio.auth_token"},
		{"no sender", func(c *twilio.Config) { c.From = "" }, "twilio.from"},
		{"bad messaging service", func(c *twilio.Config) { c.From, c.MessagingServiceSID = "", "XX1" }, "twilio.messaging_service_sid"},
		{"relative base url", func(c *twilio.Config) { c.BaseURL = "localhost:9090" }, "twilio.base_url"},
		{"bad callback", func(c *twilio.Config) { c.StatusCallback = "/cb" }, "twilio.status_callback"},
		{"negative timeout", func(c *twilio.Config) { c.Timeout = -time.Second }, "twilio.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			_, err := twilio.New(cfg)
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.field+":")):
				t.Errorf("New: %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	p, s := setup(t, func(c *twilio.Config) { c.StatusCallback = "https://hooks.example/twilio?x=1" })
	ref, err := p.Send(context.Background(), "sms:ev-1", sms(testTo, "code 1234"), meta)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "SM") || len(ref) != 34 {
		t.Errorf("ref %q is not a message SID", ref)
	}
	msgs := s.TwilioMessages(testTo)
	if len(msgs) != 1 {
		t.Fatalf("%d messages in the sandbox, want 1", len(msgs))
	}
	m := msgs[0]
	if m.SID != ref || m.From != testFrom || m.Body != "code 1234" || m.AccountSID != testAccount {
		t.Errorf("message = %+v", m)
	}
	cb, err := url.Parse(m.StatusCallback)
	if err != nil || cb.Host != "hooks.example" || cb.Query().Get("effectd_intent_id") != "42" || cb.Query().Get("effectd_event_id") != "ev-1" || cb.Query().Get("x") != "1" {
		t.Errorf("status callback %q lacks the intent id or the event id", m.StatusCallback)
	}
	if n := s.Ledger.Applied("twilio", ref); n != 1 {
		t.Errorf("applied %d times, want 1", n)
	}
}

func TestSendSender(t *testing.T) {
	t.Parallel()
	t.Run("payload from wins", func(t *testing.T) {
		t.Parallel()
		p, s := setup(t, nil)
		payload := json.RawMessage(`{"to":"` + testTo + `","body":"hi","from":"+15005550010"}`)
		if _, err := p.Send(context.Background(), "k", payload, meta); err != nil {
			t.Fatal(err)
		}
		if m := s.TwilioMessages(testTo); len(m) != 1 || m[0].From != "+15005550010" {
			t.Errorf("messages = %+v", m)
		}
	})
	t.Run("messaging service", func(t *testing.T) {
		t.Parallel()
		p, s := setup(t, func(c *twilio.Config) { c.From, c.MessagingServiceSID = "", "MGservice" })
		ref, err := p.Send(context.Background(), "k", sms(testTo, "hi"), meta)
		if err != nil {
			t.Fatal(err)
		}
		if m := s.TwilioMessages(testTo); len(m) != 1 || m[0].From != "" || m[0].MessagingServiceSID != "MGservice" {
			t.Errorf("messages = %+v", m)
		}
		got, found, err := p.Lookup(context.Background(), "k", sms(testTo, "hi"), meta, time.Now(), time.Now())
		if err != nil || !found || got != ref {
			t.Errorf("Lookup = %q, %v, %v; want %q", got, found, err, ref)
		}
	})
}

// stripAuth is a transport that sends requests without credentials.
type stripAuth struct{}

func (stripAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	return http.DefaultTransport.RoundTrip(r)
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	type want struct {
		status, code         int
		retryable, maybeSent bool
		retryAfter           time.Duration
	}
	tests := []struct {
		name    string
		edit    func(*twilio.Config)
		fault   sandbox.Fault
		to      string
		payload json.RawMessage
		want    want
	}{
		{name: "invalid number", to: sandbox.TwilioInvalidNumber, want: want{status: 400, code: 21211}},
		{name: "not E.164, refused before the call", to: "+1555"},
		{name: "unsubscribed", to: sandbox.TwilioUnsubscribedNumber, want: want{status: 400, code: 21610}},
		{name: "unroutable", to: sandbox.TwilioUnroutableNumber, want: want{status: 400, code: 21612}},
		{name: "not mobile", to: sandbox.TwilioNotMobileNumber, want: want{status: 400, code: 21614}},
		{name: "no permission", to: sandbox.TwilioNoPermissionNumber, want: want{status: 400, code: 21408}},
		{name: "from not owned", edit: func(c *twilio.Config) { c.From = sandbox.TwilioNotOwnedNumber }, want: want{status: 400, code: 21606}},
		{name: "auth", edit: func(c *twilio.Config) { c.HTTPClient = &http.Client{Transport: stripAuth{}} }, want: want{status: 401, code: 20003}},
		{name: "missing to", payload: json.RawMessage(`{"body":"x"}`)},
		{name: "not an object", payload: json.RawMessage(`"x"`)},
		{name: "rate limited", fault: sandbox.Fault{ErrorRate: 1, ErrorStatus: 429, RetryAfter: 3},
			want: want{status: 429, code: 20429, retryable: true, retryAfter: 3 * time.Second}},
		{name: "500", fault: sandbox.Fault{ErrorRate: 1, ErrorStatus: 500}, want: want{status: 500, code: 20500, retryable: true}},
		{name: "503 with retry-after", fault: sandbox.Fault{ErrorRate: 1, ErrorStatus: 503, RetryAfter: 5},
			want: want{status: 503, code: 20503, retryable: true, retryAfter: 5 * time.Second}},
		{name: "504", fault: sandbox.Fault{ErrorRate: 1, ErrorStatus: 504}, want: want{status: 504, code: 20504, retryable: true, maybeSent: true}},
		{name: "drop", fault: sandbox.Fault{DropRate: 1}, want: want{retryable: true, maybeSent: true}},
		{name: "hang past the timeout", edit: func(c *twilio.Config) { c.Timeout = 100 * time.Millisecond },
			fault: sandbox.Fault{HangRate: 1}, want: want{retryable: true, maybeSent: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, s := setup(t, tt.edit)
			s.Faults.Set("twilio", tt.fault)
			payload := tt.payload
			if payload == nil {
				payload = sms(cmpOr(tt.to, testTo), "hello")
			}
			ref, err := p.Send(context.Background(), "k", payload, meta)
			if err == nil {
				t.Fatalf("Send = %q, want an error", ref)
			}
			te := twilioError(t, err)
			got := want{te.Status, te.Code, te.Retryable(), te.MaybeSent(), te.RetryAfter()}
			if got != tt.want {
				t.Errorf("Send: %v\n got %+v\nwant %+v", err, got, tt.want)
			}
			wantCreated := 0
			if tt.fault.DropRate > 0 {
				wantCreated = 1 // applied, then the answer was lost
			}
			if n := len(s.TwilioMessages("")); n != wantCreated {
				t.Errorf("%d messages created, want %d", n, wantCreated)
			}
		})
	}
}

func TestSendTransportErrors(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens: the request is never written
	p, err := twilio.New(twilio.Config{AccountSID: testAccount, AuthToken: "secret", From: testFrom, BaseURL: down.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), "k", sms(testTo, "hi"), meta)
	if te := twilioError(t, err); !te.Retryable() || te.MaybeSent() || te.Status != 0 {
		t.Errorf("connection refused: %v: retryable %v maybeSent %v", err, te.Retryable(), te.MaybeSent())
	}
	// A lookup's URL holds the number: the error must not.
	_, _, err = p.Lookup(context.Background(), "k", sms(testTo, "hi"), meta, time.Now(), time.Now())
	if err == nil || strings.Contains(err.Error(), "5551234567") || strings.Contains(err.Error(), "15551234") {
		t.Errorf("lookup error %v shows the number", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p2, _ := setup(t, nil)
	_, err = p2.Send(ctx, "k", sms(testTo, "hi"), meta)
	if te := twilioError(t, err); !te.Retryable() || te.MaybeSent() || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before sending: %v: retryable %v maybeSent %v", err, te.Retryable(), te.MaybeSent())
	}
}

func TestErrorMasksNumbers(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil)
	const long = "+15559876543210987" // too long for E.164: refused before the call, quoted in the error
	_, err := p.Send(context.Background(), "k", sms(long, "hi"), meta)
	if err == nil {
		t.Fatal("Send to an invalid number succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "98765") || !strings.Contains(msg, "0987") || !strings.Contains(msg, "payload.to") {
		t.Errorf("error %q: want the number masked to its last 4 digits and the field", msg)
	}
}

func TestLookupAfterDrop(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, time.Hour} { // sent at once; still queued (date_sent null)
		t.Run(fmt.Sprint("queue delay ", delay), func(t *testing.T) {
			t.Parallel()
			p, s := setup(t, nil)
			s.SetTwilioQueueDelay(delay)
			s.Faults.Set("twilio", sandbox.Fault{DropRate: 1})
			claimed := time.Now()
			_, err := p.Send(context.Background(), "k", sms(testTo, "your code is 991"), meta)
			if te := twilioError(t, err); !te.MaybeSent() {
				t.Fatalf("dropped answer: %v is not maybe sent", err)
			}
			s.Faults.Set("twilio", sandbox.Fault{})
			ref, found, err := p.Lookup(context.Background(), "k", sms(testTo, "your code is 991"), meta, claimed, claimed)
			msgs := s.TwilioMessages(testTo)
			if err != nil || !found || len(msgs) != 1 || ref != msgs[0].SID {
				t.Errorf("Lookup = %q, %v, %v; sandbox has %+v", ref, found, err, msgs)
			}
		})
	}
}

func TestLookupAbsent(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil)
	ctx := context.Background()
	now := time.Now()
	if _, err := p.Send(ctx, "k", sms(testTo, "other body"), meta); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, "k", sms("+15557654321", "our body"), meta); err != nil {
		t.Fatal(err)
	}
	ref, found, err := p.Lookup(ctx, "k", sms(testTo, "our body"), meta, now, now)
	if err != nil || found {
		t.Errorf("nothing sent: Lookup = %q, %v, %v; want absent", ref, found, err)
	}
	// The same body, sent before the window opened, is not ours.
	if _, err := p.Send(ctx, "k", sms(testTo, "our body"), meta); err != nil {
		t.Fatal(err)
	}
	later := now.Add(10 * time.Minute)
	ref, found, err = p.Lookup(ctx, "k", sms(testTo, "our body"), meta, later, later)
	if err != nil || found {
		t.Errorf("older message: Lookup = %q, %v, %v; want absent", ref, found, err)
	}
}

func TestLookupAmbiguous(t *testing.T) {
	t.Parallel()
	p, s := setup(t, nil)
	s.SetTwilioQueueDelay(0)
	ctx := context.Background()
	now := time.Now()
	for range 2 {
		if _, err := p.Send(ctx, "k", sms(testTo, "same"), meta); err != nil {
			t.Fatal(err)
		}
	}
	ref, found, err := p.Lookup(ctx, "k", sms(testTo, "same"), meta, now, now)
	if !errors.Is(err, twilio.ErrAmbiguous) || found {
		t.Errorf("Lookup = %q, %v, %v; want ErrAmbiguous", ref, found, err)
	}
	if strings.Contains(err.Error(), "5551234567") {
		t.Errorf("error %q shows the number", err)
	}
}

func TestLookupBeyondLimit(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil)
	ctx := context.Background()
	now := time.Now()
	for i := range 51 {
		if _, err := p.Send(ctx, "k", sms(testTo, fmt.Sprint("msg ", i)), meta); err != nil {
			t.Fatal(err)
		}
	}
	_, found, err := p.Lookup(ctx, "k", sms(testTo, "not among them"), meta, now, now)
	if err == nil || found {
		t.Errorf("Lookup = %v, %v; want cannot tell: the window holds more than the listing shows", found, err)
	}
	_, found, err = p.Lookup(ctx, "k", sms(testTo, "msg 50"), meta, now, now)
	if err != nil || !found {
		t.Errorf("newest message: Lookup = %v, %v; want found", found, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, nil)
	for payload, field := range map[string]string{
		`{"to":"+15551234567","body":"x"}`: "",
		`{"body":"x"}`:                     "payload.to",
		`{"to":"+15551234567"}`:            "payload.body",
		`[]`:                               "payload",
		`{"to":"hello","body":"x"}`:        "payload.to",
		`{"to":15551234567,"body":"x"}`:    "payload.to",
		`{"to":"+15551234567","body":"x","media_url":"u"}`:                 "payload.media_url",
		`{"to":"+15551234567","body":5}`:                                   "payload.body",
		`{"to":"+15551234567","body":"x","from":"+1"}`:                     "payload.from",
		`{"to":"+15551234567","body":"x","from":"ACME Corp"}`:              "",
		`{"to":"+15551234567","body":"x","from":null}`:                     "",
		`{"to":"+15551234567","body":"` + strings.Repeat("é", 1601) + `"}`: "payload.body",
	} {
		err := p.Validate(json.RawMessage(payload))
		if (field == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), field)) {
			t.Errorf("Validate(%s) = %v, want field %q", payload, err, field)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
