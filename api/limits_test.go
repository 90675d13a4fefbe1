package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// TestOddStringsInBodies: a JSON body whose strings PostgreSQL could not store
// (a \u0000 escape, an unpaired surrogate, bytes that are not UTF-8) is a
// client's mistake: 400 naming the field, and nothing changes. A surrogate
// pair is one ordinary character and is stored.
func TestOddStringsInBodies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	doubt := e.insertIntent(t, "refund", "odd-doubt", statemachine.InDoubt)
	failed := e.insertIntent(t, "sms", "odd-failed", statemachine.Failed)
	path := func(id int64, action string) string { return fmt.Sprintf("/v1/intents/%d/%s", id, action) }
	cases := []struct {
		path, body, mention string
	}{
		{path(doubt, "resolve"), `{"as":"sent","provider_ref":"re_\u0000"}`, `field "provider_ref" holds a \u0000 (NUL) escape`},
		{path(doubt, "resolve"), `{"as":"skip","reason":"a\u0000b"}`, `field "reason" holds a \u0000`},
		{path(failed, "retry"), `{"reason": "x\u0000"}`, `field "reason"`},
		{path(failed, "retry"), `{"reason":"\ud800"}`, `unpaired surrogate \ud800`},
		{path(failed, "retry"), `{"reason":"\udc00\ud800x"}`, `unpaired surrogate \udc00`},
		{path(failed, "retry"), `{"reason":"\ud83d"}`, `unpaired surrogate`},
		{path(failed, "retry"), "{\"reason\":\"\xff\xfe\"}", "not UTF-8"},
		{path(failed, "cancel"), `{"re\u0000ason":"x"}`, `\u0000`},
		{"/v1/intents/bulk", `{"action":"retry","filter":{"channel":"a\u0000"},"reason":"r"}`, `field "filter.channel" holds a \u0000`},
		{"/v1/intents/bulk", `{"action":"retry","filter":{"channel":["x", {"y": "\ud800"}]},"reason":"r"}`, `field "filter.channel.y" holds an unpaired`},
		{"/v1/channels/sms/policy", `{"in_doubt":"manual\u0000"}`, `field "in_doubt"`},
	}
	for _, c := range cases {
		method := "POST"
		if strings.HasSuffix(c.path, "/policy") {
			method = "PATCH"
		}
		status, body := e.do(t, method, c.path, adminToken, c.body)
		var eb errorBody
		json.Unmarshal([]byte(body), &eb)
		if status != http.StatusBadRequest || !strings.Contains(eb.Error.Message, c.mention) {
			t.Errorf("%s %s: %d %s; want 400 naming %q", c.path, c.body, status, body, c.mention)
		}
	}
	var audits int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.audit`).Scan(&audits)
	if audits != 0 {
		t.Errorf("refused bodies wrote %d audit entries", audits)
	}
	// A surrogate pair and an escaped backslash before "u0000" are ordinary text.
	status, body := e.do(t, "POST", path(doubt, "resolve"), adminToken, `{"as":"sent","provider_ref":"re_\ud83d\ude00","reason":"\\u0000 is fine"}`)
	want(t, status, body, http.StatusOK, `"provider_ref": "re_😀"`)
	var reason string
	e.pool.QueryRow(context.Background(), `SELECT after->>'reason' FROM effectd.audit WHERE intent_id = $1`, doubt).Scan(&reason)
	if reason != `\u0000 is fine` {
		t.Errorf("stored reason %q", reason)
	}
}

// TestMethodNotAllowedSaysAllow: a 405 carries the Allow header (RFC 9110).
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/intents/1", "GET"},
		{"GET", "/v1/intents/1/retry", "POST"},
		{"PUT", "/v1/channels/sms/policy", "PATCH"},
		{"POST", "/healthz", "GET"},
	} {
		req, _ := http.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := newRecorder(e, req)
		if rec.Code != http.StatusMethodNotAllowed || strings.Join(rec.Header().Values("Allow"), ", ") != c.allow {
			t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", c.method, c.path, rec.Code, rec.Header().Values("Allow"), c.allow)
		}
	}
}

// TestResponsesBounded: a deeply nested payload is answered compact (not
// indented to many MB), a page of large payloads ends early with next set, and
// one intent shows its newest attempts and audit entries only.
func TestResponsesBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	insert := func(eventID, payload string) int64 {
		t.Helper()
		return fixture.Intent(t, e.pool, fixture.Channel("hook"), fixture.Event(eventID), fixture.Payload(payload)).ID
	}

	deep := `{"a":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`
	id := insert("deep", deep)
	status, body := e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), readToken, "")
	want(t, status, body, http.StatusOK)
	if len(body) > 4*len(deep) {
		t.Errorf("a %d-byte payload answered in %d bytes", len(deep), len(body))
	}

	big := `{"blob":"` + strings.Repeat("x", 600<<10) + `"}`
	for i := range 10 {
		insert(fmt.Sprintf("big-%d", i), big)
	}
	seen, pages := 0, 0
	for after := int64(0); ; {
		pages++
		status, body := e.do(t, "GET", fmt.Sprintf("/v1/intents?channel=hook&limit=1000&after=%d", after), readToken, "")
		want(t, status, body, http.StatusOK)
		if len(body) > operator.MaxPageBytes+64<<10 {
			t.Errorf("a page of %d bytes", len(body))
		}
		var page effectdtype.IntentPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		seen += len(page.Intents)
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	if seen != 11 || pages < 2 {
		t.Errorf("%d intents in %d pages; want 11 in more than one", seen, pages)
	}

	many := make([]fixture.Attempt, operator.MaxDetailRows+50)
	for n := range many {
		many[n] = fixture.Attempt{IntentID: id, Attempt: n + 1, Outcome: "retry", Unfinished: true}
	}
	fixture.AddAttempts(t, e.pool, many...)
	status, body = e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), readToken, "")
	want(t, status, body, http.StatusOK)
	var d struct {
		Attempts          []effectdtype.Attempt `json:"attempts"`
		AttemptsTruncated bool                  `json:"attempts_truncated"`
		AuditTruncated    bool                  `json:"audit_truncated"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != operator.MaxDetailRows || !d.AttemptsTruncated || d.Attempts[len(d.Attempts)-1].Attempt != operator.MaxDetailRows+50 || d.AuditTruncated {
		t.Errorf("%d attempts shown (truncated %v), last %d; want the newest %d", len(d.Attempts), d.AttemptsTruncated,
			d.Attempts[len(d.Attempts)-1].Attempt, operator.MaxDetailRows)
	}
}

func newRecorder(e env, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}
