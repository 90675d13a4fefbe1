package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const hookTestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookSetup serves a sandbox whose receiver "partner" has hookTestSecret.
func hookSetup(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts.WebhookSecrets == nil {
		opts.WebhookSecrets = map[string]string{"partner": hookTestSecret}
	}
	s := New(opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

// hookRequest builds a delivery of body with id, signed with secret at ts (unsigned when secret is "").
func hookRequest(t *testing.T, ctx context.Context, url, secret, id string, ts time.Time, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	}
	if secret != "" {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, ts, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	}
	return req
}

// deliver sends a signed delivery and returns the status and the ref answered.
func deliver(t *testing.T, url, id string) (status int, ref string) {
	t.Helper()
	return do(t, hookRequest(t, t.Context(), url, hookTestSecret, id, time.Now(), `{"n":1}`))
}

func do(t *testing.T, req *http.Request) (status int, ref string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", req.URL.Path, err)
	}
	defer resp.Body.Close()
	var answer struct {
		ID string `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer.ID
}

func TestHookAppliesEachIDOnce(t *testing.T) {
	t.Parallel()
	s, srv := hookSetup(t, Options{})
	url := srv.URL + "/hooks/partner"

	status, ref := deliver(t, url, "partner:evt_1")
	if status != http.StatusOK || ref == "" {
		t.Fatalf("first delivery: %d ref %q, want 200 with a ref", status, ref)
	}
	status, again := deliver(t, url, "partner:evt_1")
	if status != http.StatusOK || again != ref {
		t.Fatalf("redelivery: %d ref %q, want 200 replaying %q", status, again, ref)
	}
	if _, other := deliver(t, url, "partner:evt_2"); other == ref || other == "" {
		t.Fatalf("another id got ref %q, want a new one", other)
	}

	snap := s.Ledger.Snapshot("webhook")
	if n := s.Ledger.Applied("webhook", "partner:evt_1"); n != 1 {
		t.Errorf("evt_1 applied %d times, want 1", n)
	}
	if len(snap.Effects) != 2 || snap.Effects[0].Ref != ref || string(snap.Effects[0].Body) != `{"n":1}` {
		t.Errorf("effects = %+v", snap.Effects)
	}
	var applied []bool
	for _, c := range snap.Calls {
		applied = append(applied, c.Applied)
		if c.Status != http.StatusOK || c.Path != "/hooks/partner" || c.Method != http.MethodPost {
			t.Errorf("call recorded as %+v", c)
		}
	}
	if want := []bool{true, false, true}; len(applied) != 3 || applied[0] != want[0] || applied[1] != want[1] || applied[2] != want[2] {
		t.Errorf("calls applied = %v, want %v", applied, want)
	}
}

func TestHookConcurrentRedeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	s, srv := hookSetup(t, Options{})
	const n = 16
	refs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := hookRequest(t, t.Context(), srv.URL+"/hooks/partner", hookTestSecret, "partner:evt_1", time.Now(), `{}`)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var answer struct{ ID string }
			json.NewDecoder(resp.Body).Decode(&answer)
			refs[i] = answer.ID
		})
	}
	wg.Wait()
	for _, r := range refs {
		if r == "" || r != refs[0] {
			t.Fatalf("refs = %q, want one ref for every delivery", refs)
		}
	}
	if got := s.Ledger.Applied("webhook", "partner:evt_1"); got != 1 {
		t.Fatalf("applied %d times, want 1", got)
	}
}

func TestHookVerifiesSignature(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name   string
		secret string
		ts     time.Time
		edit   func(*http.Request)
	}{
		{"unsigned", "", now, nil},
		{"wrong secret", "whsec_c2VjcmV0LW9mLXNvbWVvbmUtZWxzZQ==", now, nil},
		{"too old", hookTestSecret, now.Add(-6 * time.Minute), nil},
		{"too new", hookTestSecret, now.Add(6 * time.Minute), nil},
		{"other id", hookTestSecret, now, func(r *http.Request) { r.Header.Set("webhook-id", "partner:evt_2") }},
		{"bad timestamp", hookTestSecret, now, func(r *http.Request) { r.Header.Set("webhook-timestamp", "yesterday") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := hookSetup(t, Options{})
			req := hookRequest(t, t.Context(), srv.URL+"/hooks/partner", tc.secret, "partner:evt_1", tc.ts, `{"n":1}`)
			if tc.edit != nil {
				tc.edit(req)
			}
			if status, _ := do(t, req); status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", status)
			}
			snap := s.Ledger.Snapshot("webhook")
			if len(snap.Effects) != 0 || len(snap.Calls) != 1 || snap.Calls[0].Status != http.StatusUnauthorized || snap.Calls[0].Applied {
				t.Fatalf("ledger = %+v, want one refused call and no effect", snap)
			}
		})
	}
	t.Run("within tolerance", func(t *testing.T) {
		t.Parallel()
		_, srv := hookSetup(t, Options{})
		req := hookRequest(t, t.Context(), srv.URL+"/hooks/partner", hookTestSecret, "partner:evt_1", now.Add(-4*time.Minute), `{}`)
		if status, _ := do(t, req); status != http.StatusOK {
			t.Fatalf("status %d, want 200", status)
		}
	})
}

func TestHookSecrets(t *testing.T) {
	t.Parallel()
	const other = "whsec_c2VjcmV0LW9mLXNvbWVvbmUtZWxzZQ=="
	for _, tc := range []struct {
		name       string
		opts       Options
		path       string
		secret     string
		wantStatus int
	}{
		{"no secret accepts unsigned", Options{WebhookSecrets: map[string]string{}}, "/hooks/open", "", 200},
		{"named secret", Options{WebhookSecrets: map[string]string{"a": other}, WebhookSecret: hookTestSecret}, "/hooks/a", other, 200},
		{"named secret refuses default", Options{WebhookSecrets: map[string]string{"a": other}, WebhookSecret: hookTestSecret}, "/hooks/a", hookTestSecret, 401},
		{"default secret", Options{WebhookSecrets: map[string]string{"a": other}, WebhookSecret: hookTestSecret}, "/hooks/b", hookTestSecret, 200},
		{"default secret refuses unsigned", Options{WebhookSecrets: map[string]string{}, WebhookSecret: hookTestSecret}, "/hooks/b", "", 401},
		{"bad configured secret", Options{WebhookSecrets: map[string]string{"a": "whsec_!!"}}, "/hooks/a", hookTestSecret, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := hookSetup(t, tc.opts)
			req := hookRequest(t, t.Context(), srv.URL+tc.path, tc.secret, "k1", time.Now(), `{}`)
			if status, _ := do(t, req); status != tc.wantStatus {
				t.Fatalf("status %d, want %d", status, tc.wantStatus)
			}
			if want, got := tc.wantStatus == 200, s.Ledger.Applied("webhook", "k1") == 1; got != want {
				t.Fatalf("applied = %v, want %v", got, want)
			}
		})
	}
}

func TestHookWithoutIDAppliesEveryCall(t *testing.T) {
	t.Parallel()
	s, srv := hookSetup(t, Options{WebhookSecrets: map[string]string{}})
	for range 2 {
		req := hookRequest(t, t.Context(), srv.URL+"/hooks/naive", "", "", time.Now(), `{}`)
		if status, ref := do(t, req); status != http.StatusOK || ref == "" {
			t.Fatalf("status %d ref %q, want 200 with a ref", status, ref)
		}
	}
	if n := len(s.Ledger.Snapshot("webhook").Effects); n != 2 {
		t.Fatalf("%d effects, want 2", n)
	}
}

func TestHookFaults(t *testing.T) {
	t.Parallel()
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		s, srv := hookSetup(t, Options{})
		s.Faults.Set("webhook", Fault{ErrorRate: 1, ErrorStatus: 503, RetryAfter: 9})
		resp, err := http.DefaultClient.Do(hookRequest(t, t.Context(), srv.URL+"/hooks/partner", hookTestSecret, "k1", time.Now(), `{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "9" {
			t.Fatalf("got %d Retry-After %q, want 503 and 9", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		snap := s.Ledger.Snapshot("webhook")
		if len(snap.Effects) != 0 || len(snap.Calls) != 1 || snap.Calls[0].Fault != "error 503" || snap.Calls[0].Status != 503 {
			t.Fatalf("ledger = %+v, want one faulted call and no effect", snap)
		}

		s.Faults.Set("webhook", Fault{})
		if status, _ := deliver(t, srv.URL+"/hooks/partner", "k1"); status != 200 || s.Ledger.Applied("webhook", "k1") != 1 {
			t.Fatalf("after clearing the fault: %d, applied %d", status, s.Ledger.Applied("webhook", "k1"))
		}
	})
	t.Run("star fault applies to webhooks", func(t *testing.T) {
		t.Parallel()
		s, srv := hookSetup(t, Options{})
		s.Faults.Set("*", Fault{ErrorRate: 1, ErrorStatus: 400})
		if status, _ := deliver(t, srv.URL+"/hooks/partner", "k1"); status != 400 {
			t.Fatalf("status %d, want 400", status)
		}
	})
	t.Run("drop", func(t *testing.T) {
		t.Parallel()
		s, srv := hookSetup(t, Options{})
		s.Faults.Set("webhook", Fault{DropRate: 1})
		_, err := http.DefaultClient.Do(hookRequest(t, t.Context(), srv.URL+"/hooks/partner", hookTestSecret, "k1", time.Now(), `{}`))
		if err == nil {
			t.Fatal("got an answer, want the connection dropped")
		}
		snap := s.Ledger.Snapshot("webhook")
		if len(snap.Effects) != 1 || len(snap.Calls) != 1 || snap.Calls[0].Fault != "drop" || !snap.Calls[0].Applied {
			t.Fatalf("ledger = %+v, want one applied, dropped call", snap)
		}
		s.Faults.Set("webhook", Fault{})
		if status, ref := deliver(t, srv.URL+"/hooks/partner", "k1"); status != 200 || ref != snap.Effects[0].Ref {
			t.Fatalf("redelivery: %d ref %q, want 200 and %q", status, ref, snap.Effects[0].Ref)
		}
		if n := s.Ledger.Applied("webhook", "k1"); n != 1 {
			t.Fatalf("applied %d times, want 1", n)
		}
	})
	t.Run("hang", func(t *testing.T) {
		t.Parallel()
		s, srv := hookSetup(t, Options{})
		s.Faults.Set("webhook", Fault{HangRate: 1})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := http.DefaultClient.Do(hookRequest(t, ctx, srv.URL+"/hooks/partner", hookTestSecret, "k1", time.Now(), `{}`))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the client's deadline", err)
		}
		// The sandbox records the call once it notices the client left.
		var calls []Call
		for deadline := time.Now().Add(5 * time.Second); len(calls) == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the hung call was never recorded")
			}
			calls = s.Ledger.Snapshot("webhook").Calls
			time.Sleep(5 * time.Millisecond) // polling, with a deadline
		}
		if calls[0].Fault != "hang" || calls[0].Applied || s.Ledger.Applied("webhook", "k1") != 0 {
			t.Fatalf("calls = %+v, want one hung call and no effect", calls)
		}
	})
	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		s, srv := hookSetup(t, Options{})
		s.Faults.Set("webhook", Fault{Latency: 50 * time.Millisecond})
		start := time.Now()
		if status, _ := deliver(t, srv.URL+"/hooks/partner", "k1"); status != 200 {
			t.Fatalf("status %d, want 200", status)
		}
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Fatalf("answered in %v, want at least the 50ms latency", took)
		}
		if c := s.Ledger.Snapshot("webhook").Calls[0]; c.Fault != "latency" || !c.Applied {
			t.Fatalf("call = %+v, want applied with latency", c)
		}
	})
}

// sandboxHTTP calls the sandbox's own HTTP surface and decodes the answer into out (when not nil).
func sandboxHTTP(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, url, err)
		}
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

func TestSandboxFaultAndLedgerEndpoints(t *testing.T) {
	t.Parallel()
	_, srv := hookSetup(t, Options{})
	u := srv.URL

	for body, want := range map[string]int{
		`{"error_rate":2}`:   http.StatusUnprocessableEntity,
		`{"drop_rate":-1}`:   http.StatusUnprocessableEntity,
		`{"unknown":1}`:      http.StatusBadRequest,
		`not json`:           http.StatusBadRequest,
		`{"error_rate":0.5}`: http.StatusOK,
	} {
		if got := sandboxHTTP(t, http.MethodPut, u+"/_sandbox/faults/twilio", body, nil); got != want {
			t.Errorf("PUT fault %s: %d, want %d", body, got, want)
		}
	}
	if got := sandboxHTTP(t, http.MethodPut, u+"/_sandbox/faults/webhook", `{"error_rate":1,"error_status":400}`, nil); got != 200 {
		t.Fatalf("PUT fault: %d", got)
	}
	var faults map[string]Fault
	sandboxHTTP(t, http.MethodGet, u+"/_sandbox/faults", "", &faults)
	if faults["webhook"].ErrorStatus != 400 || faults["twilio"].ErrorRate != 0.5 {
		t.Fatalf("faults = %+v", faults)
	}
	if status, _ := deliver(t, u+"/hooks/partner", "k1"); status != 400 {
		t.Fatalf("delivery under fault: %d, want 400", status)
	}
	if got := sandboxHTTP(t, http.MethodDelete, u+"/_sandbox/faults/webhook", "", nil); got != http.StatusNoContent {
		t.Fatalf("DELETE fault: %d", got)
	}
	if status, _ := deliver(t, u+"/hooks/partner", "k1"); status != 200 {
		t.Fatalf("delivery after clearing: %d, want 200", status)
	}

	var snap Snapshot
	sandboxHTTP(t, http.MethodGet, u+"/_sandbox/ledger?kind=webhook", "", &snap)
	if len(snap.Calls) != 2 || snap.Calls[0].Fault != "error 400" || snap.Calls[1].Seq <= snap.Calls[0].Seq ||
		len(snap.Effects) != 1 || snap.Effects[0].Key != "k1" || snap.Effects[0].Applied != 1 {
		t.Fatalf("ledger = %+v", snap)
	}
	sandboxHTTP(t, http.MethodGet, u+"/_sandbox/ledger?kind=stripe", "", &snap)
	if len(snap.Calls) != 0 || len(snap.Effects) != 0 {
		t.Fatalf("stripe ledger = %+v, want empty", snap)
	}
	if got := sandboxHTTP(t, http.MethodDelete, u+"/_sandbox/ledger", "", nil); got != http.StatusNoContent {
		t.Fatalf("DELETE ledger: %d", got)
	}
	sandboxHTTP(t, http.MethodGet, u+"/_sandbox/ledger", "", &snap)
	if len(snap.Calls) != 0 || len(snap.Effects) != 0 {
		t.Fatalf("ledger after reset = %+v, want empty", snap)
	}
}
