package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// timestamps matches the RFC 3339 times that JSON responses carry.
var timestamps = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)

// golden compares body, with timestamps normalised, to testdata/name.
func golden(t *testing.T, name, body string) {
	t.Helper()
	got := timestamps.ReplaceAllString(body, `"<time>"`)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantBody, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(wantBody) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", path, got)
	}
}

func TestListIntents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ids []int64
	for i, s := range []statemachine.State{statemachine.Pending, statemachine.Sent, statemachine.InDoubt, statemachine.Pending, statemachine.Failed} {
		ch := "sms"
		if i%2 == 1 {
			ch = "refund"
		}
		ids = append(ids, e.insertIntent(t, ch, fmt.Sprintf("ev-%d", i), s))
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE effectd.intents SET provider_ref = 're_abc', delivery = 'undelivered' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300) // past 255 bytes its key is hashed
	ids = append(ids, e.insertIntent(t, "sms", long, statemachine.Skipped))
	sum := sha256.Sum256([]byte(long))
	hashedKey := "sms:sha256:" + hex.EncodeToString(sum[:])
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	list := func(query string) ([]int64, *int64) {
		t.Helper()
		status, body := e.do(t, "GET", "/v1/intents"+query, readToken, "")
		want(t, status, body, http.StatusOK)
		var page effectdtype.IntentPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, in := range page.Intents {
			got = append(got, in.ID)
		}
		return got, page.Next
	}
	tests := []struct {
		query string
		want  []int64
	}{
		{"", ids},
		{"?status=PENDING", []int64{ids[0], ids[3]}},
		{"?channel=refund", []int64{ids[1], ids[3]}},
		{"?status=PENDING&channel=refund", []int64{ids[3]}},
		{"?event_id=ev-2", []int64{ids[2]}},
		{"?channel=nope", nil},
		{"?q=re_abc", []int64{ids[1]}},
		{"?q=sms:ev-0", []int64{ids[0]}},
		{"?q=ev-4", []int64{ids[4]}},
		{"?q=ev-4&channel=refund", nil},
		{"?q=" + hashedKey, ids[5:]},
		{"?q=" + long, ids[5:]},
		{"?delivery=undelivered", []int64{ids[1]}},
		{"?until=" + future, ids},
		{"?since=" + future, nil},
		{fmt.Sprintf("?after=%d", ids[2]), ids[3:]},
	}
	for _, tt := range tests {
		if got, next := list(tt.query); fmt.Sprint(got) != fmt.Sprint(tt.want) || next != nil {
			t.Errorf("list %q = %v next %v, want %v and no next", tt.query, got, next, tt.want)
		}
	}

	// Walk the pages two at a time: every id once, in order.
	var all []int64
	after := int64(0)
	for range 10 {
		got, next := list(fmt.Sprintf("?limit=2&after=%d", after))
		all = append(all, got...)
		if next == nil {
			break
		}
		after = *next
	}
	if fmt.Sprint(all) != fmt.Sprint(ids) {
		t.Errorf("paged through %v, want %v", all, ids)
	}

	for query, param := range map[string]string{
		"?status=pending": "status", "?status=DONE": "status", "?limit=0": "limit", "?limit=1001": "limit",
		"?limit=x": "limit", "?after=-1": "after", "?after=1e3": "after",
		"?delivery=lost": "delivery", "?since=yesterday": "since", "?until=2026-13-01T00:00:00Z": "until",
	} {
		status, body := e.do(t, "GET", "/v1/intents"+query, readToken, "")
		want(t, status, body, http.StatusUnprocessableEntity, param)
	}
}

// TestResolveInDoubt is the operator's path: an IN_DOUBT intent is listed,
// resolved as sent with a reference, audited, and cannot be resolved twice.
func TestResolveInDoubt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertIntent(t, "refund", "order-7", statemachine.InDoubt)
	e.insertIntent(t, "refund", "order-8", statemachine.Sent)

	status, body := e.do(t, "GET", "/v1/intents?status=IN_DOUBT", readToken, "")
	want(t, status, body, http.StatusOK, `"event_id": "order-7"`)
	if strings.Contains(body, "order-8") {
		t.Errorf("IN_DOUBT list shows a SENT intent: %s", body)
	}

	path := fmt.Sprintf("/v1/intents/%d/resolve", id)
	status, body = e.do(t, "POST", path, adminToken, `{"as":"sent","provider_ref":"re_123","reason":"seen in the Stripe dashboard"}`)
	want(t, status, body, http.StatusOK, `"status": "SENT"`, `"provider_ref": "re_123"`)

	status, body = e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), readToken, "")
	want(t, status, body, http.StatusOK, `"action": "intent.resolve_sent"`, `"actor": "admin"`)
	golden(t, "resolved_intent.json", body)

	status, body = e.do(t, "POST", path, adminToken, `{"as":"sent","provider_ref":"re_123","reason":"again"}`)
	want(t, status, body, http.StatusConflict, "SENT")
	status, body = e.do(t, "POST", path, adminToken, `{"as":"resend","reason":"again"}`)
	want(t, status, body, http.StatusConflict, "SENT")
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sent := e.insertIntent(t, "sms", "sent", statemachine.Sent)
	pending := e.insertIntent(t, "sms", "pending", statemachine.Pending)
	failed := e.insertIntent(t, "sms", "failed", statemachine.Failed)
	stuck := e.insertIntent(t, "sms", "stuck", statemachine.Sending)
	doubt := e.insertIntent(t, "sms", "doubt", statemachine.InDoubt)

	tests := []struct {
		path, body string
		status     int
		mention    []string
	}{
		{fmt.Sprintf("/v1/intents/%d/cancel", sent), "", http.StatusConflict, []string{"SENT", "cancel"}},
		{fmt.Sprintf("/v1/intents/%d/cancel", pending), `{"reason":"customer asked"}`, http.StatusOK, []string{`"CANCELLED"`}},
		{fmt.Sprintf("/v1/intents/%d/retry", failed), "", http.StatusOK, []string{`"PENDING"`}},
		{fmt.Sprintf("/v1/intents/%d/retry", sent), "", http.StatusConflict, []string{"SENT"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", stuck), `{"as":"resend","reason":"lease long gone"}`, http.StatusOK, []string{`"PENDING"`}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"sent","reason":"r"}`, http.StatusUnprocessableEntity, []string{"provider_ref"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip","provider_ref":"x","reason":"r"}`, http.StatusUnprocessableEntity, []string{"provider_ref"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"maybe","reason":"r"}`, http.StatusUnprocessableEntity, []string{"as"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip"}`, http.StatusUnprocessableEntity, []string{"reason", "required"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip","reason":" "}`, http.StatusUnprocessableEntity, []string{"reason"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip","reason":"` + strings.Repeat("x", 1001) + `"}`, http.StatusUnprocessableEntity, []string{"reason", "1000"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip","bogus":1}`, http.StatusBadRequest, []string{"bogus"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":1}`, http.StatusBadRequest, []string{`\"as\"`}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip"}{"as":"sent"}`, http.StatusBadRequest, []string{"trailing"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `[{"as":"skip"}]`, http.StatusBadRequest, []string{"object"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), ``, http.StatusBadRequest, []string{"object"}},
		{fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"skip","reason":"` + strings.Repeat("x", 70<<10) + `"}`, http.StatusRequestEntityTooLarge, nil},
		{fmt.Sprintf("/v1/intents/%d/cancel", doubt), `{"reasons":"x"}`, http.StatusBadRequest, []string{"reasons"}},
		{"/v1/intents/abc/cancel", "", http.StatusBadRequest, []string{"id"}},
		{"/v1/intents/0/cancel", "", http.StatusBadRequest, []string{"id"}},
		{"/v1/intents/-3/retry", "", http.StatusBadRequest, []string{"id"}},
		{"/v1/intents/99999/cancel", "", http.StatusNotFound, []string{"99999"}},
	}
	for _, tt := range tests {
		status, body := e.do(t, "POST", tt.path, adminToken, tt.body)
		t.Run(tt.path, func(t *testing.T) { want(t, status, body, tt.status, tt.mention...) })
	}
	status, body := e.do(t, "GET", "/v1/intents/99999", readToken, "")
	want(t, status, body, http.StatusNotFound)
	status, body = e.do(t, "GET", "/v1/intents/x1", readToken, "")
	want(t, status, body, http.StatusBadRequest)
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertIntent(t, "refund", "r-1", statemachine.InDoubt)
	path := fmt.Sprintf("/v1/intents/%d/reconcile", id)

	status, body := e.do(t, "POST", path+"?dry_run=true", adminToken, "")
	want(t, status, body, http.StatusOK, `"applied": false`, `"outcome": "found"`)
	status, body = e.do(t, "POST", path, adminToken, "")
	want(t, status, body, http.StatusOK, `"applied": true`)
	status, body = e.do(t, "POST", path+"?dry_run=maybe", adminToken, "")
	want(t, status, body, http.StatusUnprocessableEntity, "dry_run")
	if fmt.Sprint(e.recon.calls) != "[true false]" {
		t.Errorf("reconciler called with dry runs %v, want [true false]", e.recon.calls)
	}
	// The dispatcher audits an applied reconcile under the caller's token name
	// (dispatcher's TestReconcileNow checks the audit row).
	if fmt.Sprint(e.recon.actors) != "[admin admin]" {
		t.Errorf("reconciler called as %v, want the token's name", e.recon.actors)
	}
}
