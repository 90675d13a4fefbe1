package stripesandbox

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// setup starts an emulator whose clock moves only by advance, keeping keys
// for keyWindow (0: the default).
func setup(t *testing.T, keyWindow time.Duration) (s *Emulator, srv *httptest.Server, advance func(time.Duration)) {
	t.Helper()
	s = New(emu.NewLedger(), &emu.Faults{}, keyWindow)
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	s.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	mux := http.NewServeMux()
	s.Routes(mux)
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv, func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

type answer struct {
	status   int
	replayed bool
	body     map[string]any
}

func do(t *testing.T, ctx context.Context, srv *httptest.Server, method, path, key string, form url.Values) answer {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else if len(form) > 0 {
		path += "?" + form.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, body)
	req.Header.Set("Authorization", "Bearer sk_test_1")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	if err := json.NewDecoder(res.Body).Decode(&a.body); err != nil {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return a
}

func (a answer) errField(k string) any {
	e, _ := a.body["error"].(map[string]any)
	return e[k]
}

var refundForm = url.Values{"payment_intent": {"pi_1"}, "amount": {"300"}, "metadata[effectd_event_id]": {"e1"}}

func TestAuth(t *testing.T) {
	t.Parallel()
	_, srv, _ := setup(t, 0)
	for _, auth := range []string{"", "Bearer sk_live_1", "Basic abc"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/refunds", strings.NewReader(refundForm.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error apiError }
		json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != 401 || body.Error.Type != "invalid_request_error" || body.Error.Message == "" {
			t.Errorf("auth %q: %d %+v, want 401 invalid_request_error", auth, res.StatusCode, body)
		}
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s, srv, _ := setup(t, 0)
	for _, tc := range []struct {
		path  string
		form  url.Values
		param string
	}{
		{"/v1/refunds", url.Values{"amount": {"5"}}, "payment_intent"},
		{"/v1/refunds", url.Values{"charge": {"ch_1"}, "amount": {"-5"}}, "amount"},
		{"/v1/refunds", url.Values{"charge": {"ch_1"}, "amount": {"1.5"}}, "amount"},
		{"/v1/payment_intents", url.Values{"amount": {"5"}}, "currency"},
		{"/v1/payment_intents", url.Values{"currency": {"usd"}}, "amount"},
		{"/v1/transfers", url.Values{"amount": {"5"}, "destination": {"acct_1"}}, "currency"},
		{"/v1/transfers", url.Values{"amount": {"5"}, "currency": {"usd"}}, "destination"},
	} {
		a := do(t, context.Background(), srv, http.MethodPost, tc.path, "k", tc.form)
		if a.status != 400 || a.errField("type") != "invalid_request_error" || a.errField("param") != tc.param {
			t.Errorf("POST %s %v: %d %v, want 400 with param %s", tc.path, tc.form, a.status, a.body, tc.param)
		}
	}
	// Refusals save nothing: the key is still free for a valid request.
	if a := do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "k", refundForm); a.status != 200 || a.replayed {
		t.Errorf("valid request after refusals: %d %v", a.status, a.body)
	}
	if n := len(s.Ledger.Snapshot("stripe").Effects); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	s, srv, advance := setup(t, time.Hour)
	ctx := context.Background()
	first := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	if first.status != 200 || first.replayed || !strings.HasPrefix(first.body["id"].(string), "re_") {
		t.Fatalf("first: %d %v", first.status, first.body)
	}
	again := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k1", refundForm)
	if again.status != 200 || !again.replayed || again.body["id"] != first.body["id"] {
		t.Errorf("replay: %d replayed=%v %v, want the first refund replayed", again.status, again.replayed, again.body)
	}
	other := url.Values{"payment_intent": {"pi_1"}, "amount": {"301"}, "metadata[effectd_event_id]": {"e1"}}
	if a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k1", other); a.status != 400 || a.errField("type") != "idempotency_error" {
		t.Errorf("other parameters: %d %v, want 400 idempotency_error", a.status, a.body)
	}
	if n := s.Ledger.Applied("stripe", "k1"); n != 1 {
		t.Errorf("applied %d, want 1", n)
	}
	// Past the window the key is forgotten: the same request creates anew.
	advance(time.Hour + time.Second)
	late := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k1", other)
	if late.status != 200 || late.replayed || late.body["id"] == first.body["id"] {
		t.Errorf("after the window: %d replayed=%v %v, want a new refund", late.status, late.replayed, late.body)
	}
	if n := s.Ledger.Applied("stripe", "k1"); n != 2 {
		t.Errorf("applied %d, want 2 (the key expired)", n)
	}
}

func TestKeyInUse(t *testing.T) {
	t.Parallel()
	s, srv, _ := setup(t, 0)
	s.Faults.Set("stripe", emu.Fault{Latency: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/refunds", strings.NewReader(refundForm.Encode()))
		req.Header.Set("Authorization", "Bearer sk_test_1")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", "busy")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	// Wait until the first request holds the key.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		_, held := s.keys["sk_test_1\x00busy"]
		s.mu.Unlock()
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never claimed its key")
		}
		runtime.Gosched()
	}
	a := do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "busy", refundForm)
	if a.status != 409 || a.errField("code") != "idempotency_key_in_use" {
		t.Errorf("concurrent: %d %v, want 409 idempotency_key_in_use", a.status, a.body)
	}
	cancel()
	<-done
	// The abandoned request never ran: the key is released and nothing applied.
	// The server sees the client gone a moment after the client does (and the
	// request may not have drawn its hang yet): the fault stays until then.
	for deadline := time.Now().Add(5 * time.Second); ; runtime.Gosched() {
		s.mu.Lock()
		_, held := s.keys["sk_test_1\x00busy"]
		s.mu.Unlock()
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned request never released its key")
		}
	}
	s.Faults.Set("stripe", emu.Fault{})
	deadline = time.Now().Add(5 * time.Second)
	for {
		a = do(t, context.Background(), srv, http.MethodPost, "/v1/refunds", "busy", refundForm)
		if a.status != 409 || time.Now().After(deadline) {
			break
		}
	}
	if a.status != 200 || a.replayed {
		t.Errorf("after the hung request was abandoned: %d replayed=%v %v, want a fresh 200", a.status, a.replayed, a.body)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	s, srv, _ := setup(t, 0)
	ctx := context.Background()
	// An injected 500 is saved and replayed; nothing is applied.
	s.Faults.Set("stripe", emu.Fault{ErrorRate: 1, ErrorStatus: 500})
	if a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k500", refundForm); a.status != 500 || a.replayed {
		t.Errorf("injected 500: %d %v", a.status, a.body)
	}
	// An injected 503 is not saved.
	s.Faults.Set("stripe", emu.Fault{ErrorRate: 1, ErrorStatus: 503})
	if a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k503", refundForm); a.status != 503 {
		t.Errorf("injected 503: %d %v", a.status, a.body)
	}
	s.Faults.Set("stripe", emu.Fault{})
	if a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k500", refundForm); a.status != 500 || !a.replayed {
		t.Errorf("after a saved 500: %d replayed=%v, want the 500 replayed", a.status, a.replayed)
	}
	if a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "k503", refundForm); a.status != 200 || a.replayed {
		t.Errorf("after an unsaved 503: %d replayed=%v, want a fresh 200", a.status, a.replayed)
	}
	// Drop applies, saves, and answers nothing; the replay has the refund.
	s.Faults.Set("stripe", emu.Fault{DropRate: 1})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/refunds", strings.NewReader(refundForm.Encode()))
	req.Header.Set("Authorization", "Bearer sk_test_1")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", "kdrop")
	if res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("drop answered %d", res.StatusCode)
	}
	s.Faults.Set("stripe", emu.Fault{})
	a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", "kdrop", refundForm)
	if a.status != 200 || !a.replayed || s.Ledger.Applied("stripe", "kdrop") != 1 {
		t.Errorf("after drop: %d replayed=%v applied=%d", a.status, a.replayed, s.Ledger.Applied("stripe", "kdrop"))
	}
	if n := s.Ledger.Applied("stripe", "k500"); n != 0 {
		t.Errorf("k500 applied %d, want 0", n)
	}
}

func TestListSearchRetrieve(t *testing.T) {
	t.Parallel()
	_, srv, _ := setup(t, 0)
	ctx := context.Background()
	var ids []string
	for i, pi := range []string{"pi_a", "pi_b", "pi_a", "pi_a"} {
		f := url.Values{"payment_intent": {pi}, "metadata[effectd_event_id]": {"e" + string(rune('0'+i))}}
		ids = append(ids, do(t, ctx, srv, http.MethodPost, "/v1/refunds", "", f).body["id"].(string))
	}
	listIDs := func(q url.Values) ([]string, bool) {
		a := do(t, ctx, srv, http.MethodGet, "/v1/refunds", "", q)
		var out []string
		for _, o := range a.body["data"].([]any) {
			out = append(out, o.(map[string]any)["id"].(string))
		}
		return out, a.body["has_more"].(bool)
	}
	page1, more := listIDs(url.Values{"payment_intent": {"pi_a"}, "limit": {"2"}})
	if len(page1) != 2 || page1[0] != ids[3] || page1[1] != ids[2] || !more {
		t.Errorf("page 1: %v more=%v, want [%s %s] and more", page1, more, ids[3], ids[2])
	}
	page2, more := listIDs(url.Values{"payment_intent": {"pi_a"}, "limit": {"2"}, "starting_after": {page1[1]}})
	if len(page2) != 1 || page2[0] != ids[0] || more {
		t.Errorf("page 2: %v more=%v, want [%s]", page2, more, ids[0])
	}
	pi := do(t, ctx, srv, http.MethodPost, "/v1/payment_intents", "", url.Values{
		"amount": {"5"}, "currency": {"usd"}, "customer": {"cus_1"}, "metadata[effectd_event_id]": {"it's"}})
	search := do(t, ctx, srv, http.MethodGet, "/v1/payment_intents/search", "", url.Values{"query": {`metadata['effectd_event_id']:'it\'s'`}})
	if data, _ := search.body["data"].([]any); search.body["object"] != "search_result" || len(data) != 1 {
		t.Errorf("search by metadata with an escaped quote: %v", search.body)
	}
	search = do(t, ctx, srv, http.MethodGet, "/v1/payment_intents/search", "", url.Values{"query": {"customer:'cus_1'"}})
	if data, _ := search.body["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != pi.body["id"] {
		t.Errorf("search: %v, want %s", search.body, pi.body["id"])
	}
	got := do(t, ctx, srv, http.MethodGet, "/v1/payment_intents/"+pi.body["id"].(string), "", nil)
	if got.status != 200 || got.body["id"] != pi.body["id"] || got.body["object"] != "payment_intent" {
		t.Errorf("retrieve: %d %v", got.status, got.body)
	}
	if miss := do(t, ctx, srv, http.MethodGet, "/v1/refunds/"+pi.body["id"].(string), "", nil); miss.status != 404 || miss.errField("code") != "resource_missing" {
		t.Errorf("retrieve of another kind: %d %v, want 404", miss.status, miss.body)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	s, srv, _ := setup(t, 0)
	var wg sync.WaitGroup
	statuses := make(chan int, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- do(t, context.Background(), srv, http.MethodPost, "/v1/transfers", "same",
				url.Values{"amount": {"5"}, "currency": {"usd"}, "destination": {"acct_1"}}).status
		}()
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 200 && st != 409 {
			t.Errorf("status %d, want 200 or 409", st)
		}
	}
	if n := s.Ledger.Applied("stripe", "same"); n != 1 {
		t.Errorf("applied %d, want 1", n)
	}
}
