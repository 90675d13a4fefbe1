package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/providertest"
	"github.com/effectd/effectd/providers/sandbox"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var testPayload = json.RawMessage(`{"type":"refund.created","amount":100}`)

// setup returns a provider posting to a test server running handler.
func setup(t *testing.T, handler http.HandlerFunc) (*Provider, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	p, err := New(Config{URL: srv.URL + "/hook?token=x", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	return p, srv
}

func send(t *testing.T, p *Provider) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, "partner:evt_1", testPayload, map[string]string{"effectd_event_id": "evt_1"})
}

// requireClass fails t unless err is an *Error with the given behaviour.
func requireClass(t *testing.T, err error, retryable, maybeSent bool) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *webhook.Error", err, err)
	}
	if e.Retryable() != retryable || e.MaybeSent() != maybeSent {
		t.Fatalf("error %q: Retryable=%v MaybeSent=%v, want %v %v", err, e.Retryable(), e.MaybeSent(), retryable, maybeSent)
	}
	return e
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no url", Config{Secret: testSecret}, "webhook.url"},
		{"relative url", Config{URL: "/hooks", Secret: testSecret}, "webhook.url"},
		{"ftp url", Config{URL: "ftp://example.com/x", Secret: testSecret}, "webhook.url"},
		{"no host", Config{URL: "http:///x", Secret: testSecret}, "webhook.url"},
		{"no secret", Config{URL: "https://example.com"}, "webhook.secret"},
		{"empty key", Config{URL: "https://example.com", Secret: "whsec_"}, "webhook.secret"},
		{"not base64", Config{URL: "https://example.com", Secret: "whsec_!!!"}, "webhook.secret"},
		{"negative timeout", Config{URL: "https://example.com", Secret: testSecret, Timeout: -time.Second}, "webhook.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Fatalf("New error = %v, want one naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "MfKQ9r8") {
				t.Fatalf("error %q leaks the secret", err)
			}
		})
	}
	if _, err := New(Config{URL: "https://example.com/hooks", Secret: testSecret}); err != nil {
		t.Fatalf("New with a valid config: %v", err)
	}
}

func TestSendSignsAndReturnsRef(t *testing.T) {
	t.Parallel()
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter)
		wantRef string
	}{
		{"header ref", func(w http.ResponseWriter) {
			w.Header().Set("X-Effect-Ref", "ref_header")
			io.WriteString(w, `{"id":"ref_body"}`)
		}, "ref_header"},
		{"json id", func(w http.ResponseWriter) { io.WriteString(w, `{"id":"ref_body"}`) }, "ref_body"},
		{"no ref", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, "partner:evt_1"},
		{"not json", func(w http.ResponseWriter) { io.WriteString(w, "ok") }, "partner:evt_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var checked atomic.Bool
			p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				for h, want := range map[string]string{
					"Idempotency-Key": "partner:evt_1",
					"Webhook-Id":      "partner:evt_1",
					"User-Agent":      "effectd",
					"Content-Type":    "application/json",
				} {
					if got := r.Header.Get(h); got != want {
						t.Errorf("header %s = %q, want %q", h, got, want)
					}
				}
				if err := wh.Verify(body, r.Header); err != nil {
					t.Errorf("signature does not verify: %v", err)
				}
				if string(body) != string(testPayload) || r.Method != http.MethodPost || r.URL.RawQuery != "token=x" {
					t.Errorf("got %s %s body %s", r.Method, r.URL, body)
				}
				checked.Store(true)
				tc.answer(w)
			})
			ref, err := send(t, p)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if ref != tc.wantRef {
				t.Errorf("ref = %q, want %q", ref, tc.wantRef)
			}
			if !checked.Load() {
				t.Error("the server never got the webhook")
			}
		})
	}
}

func TestSendClassifiesAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{301, false}, {302, false}, {307, false},
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {410, false}, {422, false},
		{408, true}, {425, true}, {429, true},
		{500, true}, {502, true}, {503, true}, {504, true},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			var followed atomic.Bool
			p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					followed.Store(true)
					return
				}
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(tc.status)
				io.WriteString(w, "  nope:\n\t"+strings.Repeat("x", 300))
			})
			_, err := send(t, p)
			e := requireClass(t, err, tc.retryable, false)
			if e.Status != tc.status {
				t.Errorf("Status = %d, want %d", e.Status, tc.status)
			}
			msg := err.Error()
			if !strings.Contains(msg, http.StatusText(tc.status)) || !strings.Contains(msg, `"nope:  xxx`) || strings.Contains(msg, "\n") {
				t.Errorf("Error() = %q, want the status and a one-line body excerpt", msg)
			}
			if len(e.Body) > 210 || strings.Contains(msg, "token=x") {
				t.Errorf("Error() = %q: excerpt too long or query leaked", msg)
			}
			if followed.Load() {
				t.Error("the redirect was followed")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// The header's forms are read by effect.ParseRetryAfter (its own test);
	// here, through a real answer, with the provider's clock pinned.
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	p.now = func() time.Time { return now }
	_, err := send(t, p)
	if e := requireClass(t, err, true, false); e.RetryAfter() != 30*time.Second {
		t.Errorf("RetryAfter = %v, want 30s", e.RetryAfter())
	}
}

func TestSendRefusesBadInputWithoutCalling(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	_, err := p.Send(t.Context(), "k", json.RawMessage(`{"broken"`), nil)
	requireClass(t, err, false, false)
	_, err = p.Send(t.Context(), "", testPayload, nil)
	requireClass(t, err, false, false)
	if calls.Load() != 0 {
		t.Errorf("server got %d calls, want 0", calls.Load())
	}
}

func TestSendConnectionRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := New(Config{URL: "http://" + addr + "/hook", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = send(t, p)
	requireClass(t, err, true, false)
}

// hijackAfterRead reads the whole request, then closes the connection unanswered.
func hijackAfterRead(calls *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	}
}

func TestSendResetAfterWriteIsMaybeSent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	p, _ := setup(t, hijackAfterRead(&calls))
	_, err := send(t, p)
	requireClass(t, err, true, true)
	if calls.Load() != 1 {
		t.Errorf("server got %d calls, want 1", calls.Load())
	}
}

// A written POST whose reused connection dies unanswered must reach the
// caller as maybe sent, not be replayed silently by net/http.
func TestSendIsNotReplayedOnReusedConnection(t *testing.T) {
	t.Parallel()
	var calls, drops atomic.Int32
	drop := hijackAfterRead(&drops)
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			drop(w, r)
		}
	})
	if _, err := send(t, p); err != nil {
		t.Fatalf("first Send: %v", err)
	}
	_, err := send(t, p) // on the kept-alive connection of the first
	requireClass(t, err, true, true)
	if calls.Load() != 2 {
		t.Errorf("server got %d calls, want 2 (no silent replay)", calls.Load())
	}
}

func TestSendHangCutByDeadline(t *testing.T) {
	t.Parallel()
	hang := func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		<-r.Context().Done()
	}
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, hang)
		// Long enough for the request to be written even on a loaded machine:
		// a deadline that fires before the write is (rightly) not maybe-sent.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := p.Send(ctx, "partner:evt_1", testPayload, nil)
		requireClass(t, err, true, true)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
		}
	})
	t.Run("config timeout", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(hang))
		t.Cleanup(srv.Close)
		p, err := New(Config{URL: srv.URL, Secret: testSecret, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = p.Send(t.Context(), "partner:evt_1", testPayload, nil)
		requireClass(t, err, true, true)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Send took %v with a 2s timeout", took)
		}
	})
}

func TestSendAgainstSandbox(t *testing.T) {
	t.Parallel()
	sb := sandbox.New(sandbox.Options{WebhookSecrets: map[string]string{"partner": testSecret}})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	newProvider := func(secret string) *Provider {
		p, err := New(Config{URL: srv.URL + "/hooks/partner", Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	ref, err := send(t, newProvider(testSecret))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	effects := sb.Ledger.Snapshot("webhook").Effects
	if len(effects) != 1 || effects[0].Ref != ref || effects[0].Key != "partner:evt_1" {
		t.Fatalf("ledger effects = %+v, want one with ref %q", effects, ref)
	}

	// A wrong secret is refused by the receiver, permanently.
	_, err = newProvider("whsec_"+"c2VjcmV0LW9mLXNvbWVvbmUtZWxzZQ==").Send(t.Context(), "partner:evt_2", testPayload, nil)
	if e := requireClass(t, err, false, false); e.Status != http.StatusUnauthorized {
		t.Errorf("Status = %d, want 401", e.Status)
	}
	if n := len(sb.Ledger.Snapshot("webhook").Effects); n != 1 {
		t.Errorf("ledger has %d effects after a refused call, want 1", n)
	}
}

func TestContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Kind:    "webhook",
		Keyed:   true,
		Sandbox: sandbox.Options{WebhookSecrets: map[string]string{"contract": testSecret}},
		New: func(t *testing.T, baseURL string) providertest.Provider {
			p, err := New(Config{URL: baseURL + "/hooks/contract", Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Payload: func(i int) json.RawMessage {
			return json.RawMessage(`{"type":"order.paid","order":` + strings.Repeat("1", i) + `}`)
		},
	})
}
