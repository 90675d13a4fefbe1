package twiliosandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

const testAccount = "ACtest"

// testClock is a settable clock for the emulator.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// setup starts an emulator whose clock moves only by Advance.
func setup(t *testing.T) (*Emulator, *httptest.Server, *testClock) {
	t.Helper()
	s := New(emu.NewLedger(), &emu.Faults{})
	clock := &testClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	s.Now = clock.Now
	return s, serve(t, s), clock
}

// serve starts a server of e's routes; it stops when t ends.
func serve(t *testing.T, e *Emulator) *httptest.Server {
	mux := http.NewServeMux()
	e.Routes(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// call sends one request as the test account and decodes the JSON answer.
func call(t *testing.T, ts *httptest.Server, method, path string, form url.Values) (int, map[string]any, http.Header) {
	t.Helper()
	code, body, h, err := callErr(context.Background(), ts, testAccount, method, path, form)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, body, h
}

func callErr(ctx context.Context, ts *httptest.Server, account, method, path string, form url.Values) (int, map[string]any, http.Header, error) {
	var req *http.Request
	var err error
	if method == http.MethodPost {
		req, err = http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(form.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, method, ts.URL+path, nil)
	}
	if err != nil {
		return 0, nil, nil, err
	}
	if account != "" {
		req.SetBasicAuth(account, "token")
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, nil, nil, fmt.Errorf("decode: %w", err)
	}
	return resp.StatusCode, body, resp.Header, nil
}

const messagesPath = "/2010-04-01/Accounts/" + testAccount + "/Messages.json"

func sendForm(to, body string) url.Values {
	return url.Values{"To": {to}, "From": {"+15005550006"}, "Body": {body}}
}

func send(t *testing.T, ts *httptest.Server, to, body string) string {
	t.Helper()
	code, msg, _ := call(t, ts, http.MethodPost, messagesPath, sendForm(to, body))
	if code != http.StatusCreated {
		t.Fatalf("create: status %d: %v", code, msg)
	}
	return msg["sid"].(string)
}

func TestCreate(t *testing.T) {
	t.Parallel()
	s, ts, _ := setup(t)
	form := sendForm("+15551234567", "your code is 1234")
	form.Set("StatusCallback", "https://example.test/cb?effectd_intent_id=7")
	code, msg, _ := call(t, ts, http.MethodPost, messagesPath, form)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %v", code, msg)
	}
	sid, _ := msg["sid"].(string)
	if !regexp.MustCompile(`^SM[0-9a-f]{32}$`).MatchString(sid) {
		t.Errorf("sid %q is not SM + 32 hex", sid)
	}
	want := map[string]any{"status": "queued", "date_sent": nil, "to": "+15551234567", "from": "+15005550006",
		"body": "your code is 1234", "account_sid": testAccount, "date_created": "Sat, 01 Mar 2025 12:00:00 +0000",
		"uri": "/2010-04-01/Accounts/ACtest/Messages/" + sid + ".json", "direction": "outbound-api"}
	for k, v := range want {
		if msg[k] != v {
			t.Errorf("%s = %#v, want %#v", k, msg[k], v)
		}
	}
	if n := s.Ledger.Applied("twilio", sid); n != 1 {
		t.Errorf("applied %d times, want 1", n)
	}
	snap := s.Ledger.Snapshot("twilio")
	if len(snap.Calls) != 1 || snap.Calls[0].Status != http.StatusCreated || !snap.Calls[0].Applied || snap.Calls[0].Ref != sid {
		t.Errorf("calls = %+v", snap.Calls)
	}
	got := s.Messages("+15551234567")
	if len(got) != 1 || got[0].SID != sid || got[0].StatusCallback != form.Get("StatusCallback") {
		t.Errorf("Messages = %+v", got)
	}
}

func TestNoIdempotency(t *testing.T) {
	t.Parallel()
	s, ts, _ := setup(t)
	a := send(t, ts, "+15551234567", "same")
	b := send(t, ts, "+15551234567", "same")
	if a == b {
		t.Fatalf("two POSTs returned one sid %s", a)
	}
	if n := len(s.Messages("+15551234567")); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
	if n := len(s.Ledger.Snapshot("twilio").Effects); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		form url.Values
		code int
	}{
		{"not E.164", sendForm("+1555", "x"), 21211},
		{"no plus", sendForm("15551234567", "x"), 21211},
		{"missing To", url.Values{"From": {"+15005550006"}, "Body": {"x"}}, 21604},
		{"missing From", url.Values{"To": {"+15551234567"}, "Body": {"x"}}, 21603},
		{"missing Body", url.Values{"To": {"+15551234567"}, "From": {"+15005550006"}}, 21602},
		{"long Body", sendForm("+15551234567", strings.Repeat("x", 1601)), 21617},
		{"magic invalid", sendForm(InvalidNumber, "x"), 21211},
		{"magic unroutable", sendForm(UnroutableNumber, "x"), 21612},
		{"magic no permission", sendForm(NoPermissionNumber, "x"), 21408},
		{"magic unsubscribed", sendForm(UnsubscribedNumber, "x"), 21610},
		{"magic not mobile", sendForm(NotMobileNumber, "x"), 21614},
		{"invalid From", url.Values{"To": {"+15551234567"}, "From": {InvalidNumber}, "Body": {"x"}}, 21212},
		{"From not owned", url.Values{"To": {"+15551234567"}, "From": {NotOwnedNumber}, "Body": {"x"}}, 21606},
	}
	s, ts, _ := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := call(t, ts, http.MethodPost, messagesPath, tt.form)
			if code != http.StatusBadRequest || body["code"] != float64(tt.code) || body["status"] != float64(400) {
				t.Errorf("got %d %v, want 400 code %d", code, body, tt.code)
			}
			if body["message"] == "" || body["more_info"] != fmt.Sprintf("https://www.twilio.com/docs/errors/%d", tt.code) {
				t.Errorf("error body %v lacks message or more_info", body)
			}
		})
	}
	if n := len(s.Messages("")); n != 0 {
		t.Errorf("%d messages created by invalid requests", n)
	}
	// A messaging service replaces From.
	code, msg, _ := call(t, ts, http.MethodPost, messagesPath,
		url.Values{"To": {"+15551234567"}, "MessagingServiceSid": {"MGabc"}, "Body": {"x"}})
	if code != http.StatusCreated || msg["messaging_service_sid"] != "MGabc" || msg["from"] != nil {
		t.Errorf("messaging service: %d %v", code, msg)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s, ts, _ := setup(t)
	for _, account := range []string{"", "ACother"} {
		code, body, _, err := callErr(context.Background(), ts, account, http.MethodPost, messagesPath, sendForm("+15551234567", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized || body["code"] != float64(20003) || body["status"] != float64(401) {
			t.Errorf("account %q: got %d %v, want 401 code 20003", account, code, body)
		}
	}
	if n := len(s.Messages("")); n != 0 {
		t.Errorf("%d messages created without auth", n)
	}
}

func TestQueuedThenSent(t *testing.T) {
	t.Parallel()
	_, ts, clock := setup(t)
	sid := send(t, ts, "+15551234567", "hi")
	path := "/2010-04-01/Accounts/ACtest/Messages/" + sid + ".json"
	if _, m, _ := call(t, ts, http.MethodGet, path, nil); m["status"] != "queued" || m["date_sent"] != nil {
		t.Fatalf("fresh message: %v", m)
	}
	after := url.Values{"DateSent>": {"2025-03-01T11:59:00Z"}}.Encode()
	if _, l, _ := call(t, ts, http.MethodGet, messagesPath+"?"+after, nil); len(l["messages"].([]any)) != 0 {
		t.Errorf("a queued message matched a DateSent filter: %v", l["messages"])
	}
	clock.Advance(defaultQueueDelay)
	if _, m, _ := call(t, ts, http.MethodGet, path, nil); m["status"] != "sent" || m["date_sent"] != "Sat, 01 Mar 2025 12:00:01 +0000" {
		t.Errorf("after the queue delay: %v", m)
	}
	if _, l, _ := call(t, ts, http.MethodGet, messagesPath+"?"+after, nil); len(l["messages"].([]any)) != 1 {
		t.Errorf("DateSent> missed a sent message: %v", l["messages"])
	}
	before := url.Values{"DateSent<": {"2025-03-01T11:59:00Z"}}.Encode()
	if _, l, _ := call(t, ts, http.MethodGet, messagesPath+"?"+before, nil); len(l["messages"].([]any)) != 0 {
		t.Errorf("DateSent< matched a later message: %v", l["messages"])
	}
	day := url.Values{"DateSent": {"2025-03-01"}}.Encode()
	if _, l, _ := call(t, ts, http.MethodGet, messagesPath+"?"+day, nil); len(l["messages"].([]any)) != 1 {
		t.Errorf("DateSent=day missed the message: %v", l["messages"])
	}
	if code, _, _ := call(t, ts, http.MethodGet, "/2010-04-01/Accounts/ACtest/Messages/SMnope.json", nil); code != http.StatusNotFound {
		t.Errorf("unknown sid: %d, want 404", code)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	_, ts, clock := setup(t)
	var want []string // newest first
	for i := range 5 {
		want = append([]string{send(t, ts, "+15550000001", fmt.Sprint("m", i))}, want...)
		send(t, ts, "+15550000002", "other")
		clock.Advance(time.Second)
	}
	var got []string
	next := messagesPath + "?" + url.Values{"To": {"+15550000001"}, "PageSize": {"2"}}.Encode()
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than expected")
		}
		code, l, _ := call(t, ts, http.MethodGet, next, nil)
		if code != http.StatusOK {
			t.Fatalf("list: %d %v", code, l)
		}
		for _, m := range l["messages"].([]any) {
			got = append(got, m.(map[string]any)["sid"].(string))
		}
		next, _ = l["next_page_uri"].(string)
		if pages == 0 { // a message created between pages must not shift the next page
			send(t, ts, "+15550000001", "late")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paged sids\n got %v\nwant %v", got, want)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("error 429", func(t *testing.T) {
		t.Parallel()
		s, ts, _ := setup(t)
		s.Faults.Set("twilio", emu.Fault{ErrorRate: 1, ErrorStatus: http.StatusTooManyRequests, RetryAfter: 7})
		code, body, h := call(t, ts, http.MethodPost, messagesPath, sendForm("+15551234567", "x"))
		if code != 429 || body["code"] != float64(20429) || h.Get("Retry-After") != "7" {
			t.Errorf("got %d %v Retry-After %q", code, body, h.Get("Retry-After"))
		}
		if n := len(s.Messages("")); n != 0 {
			t.Errorf("an injected error created %d messages", n)
		}
	})
	t.Run("drop", func(t *testing.T) {
		t.Parallel()
		s, ts, _ := setup(t)
		s.Faults.Set("twilio", emu.Fault{DropRate: 1})
		_, _, _, err := callErr(context.Background(), ts, testAccount, http.MethodPost, messagesPath, sendForm("+15551234567", "x"))
		if err == nil {
			t.Fatal("a dropped response reached the client")
		}
		msgs := s.Messages("")
		if len(msgs) != 1 {
			t.Fatalf("drop created %d messages, want 1", len(msgs))
		}
		calls := s.Ledger.Snapshot("twilio").Calls
		if len(calls) != 1 || calls[0].Fault != "drop" || !calls[0].Applied || calls[0].Ref != msgs[0].SID {
			t.Errorf("calls = %+v", calls)
		}
	})
	t.Run("hang", func(t *testing.T) {
		t.Parallel()
		s, ts, _ := setup(t)
		s.Faults.Set("twilio", emu.Fault{HangRate: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, _, _, err := callErr(ctx, ts, testAccount, http.MethodPost, messagesPath, sendForm("+15551234567", "x"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if n := len(s.Messages("")); n != 0 {
			t.Errorf("a hung request created %d messages", n)
		}
	})
}

func TestConcurrentCreates(t *testing.T) {
	t.Parallel()
	s, ts, _ := setup(t)
	const n = 20
	var wg sync.WaitGroup
	sids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			code, m, _, err := callErr(context.Background(), ts, testAccount, http.MethodPost, messagesPath, sendForm("+15551234567", "x"))
			if err != nil || code != http.StatusCreated {
				t.Errorf("create %d: %d %v", i, code, err)
				return
			}
			sids[i] = m["sid"].(string)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, sid := range sids {
		seen[sid] = true
	}
	if len(seen) != n || len(s.Messages("+15551234567")) != n {
		t.Errorf("%d distinct sids, %d messages; want %d", len(seen), len(s.Messages("+15551234567")), n)
	}
}
