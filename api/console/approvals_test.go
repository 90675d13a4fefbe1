package console

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
)

// The tokens of the two-person console test: two people with the approve
// right on sms.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
)

// setupTwoPerson is setup with channel sms two-person and alice and bob,
// operators who may approve on sms, as its tokens.
func setupTwoPerson(t *testing.T) env {
	t.Helper()
	e := setup(t)
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.channels SET policy = policy || '{"approval": "two-person"}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	sms := []string{"sms"}
	tokens := api.Tokens{
		api.NewToken(api.Principal{Name: "alice", Role: api.RoleOperator, Channels: sms, Approves: sms}, aliceToken),
		api.NewToken(api.Principal{Name: "bob", Role: api.RoleOperator, Channels: sms, Approves: sms}, bobToken),
	}
	log := slog.New(slog.DiscardHandler)
	ah, err := api.NewHandler(api.Config{Pool: e.pool, Tokens: tokens, Registry: prometheus.NewRegistry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := New(Config{Pool: e.pool, API: ah, Tokens: tokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("/", ah)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// TestConsoleTwoPerson: on a two-person channel the resolve form makes a
// request and says so; the queue shows it to its requester without decision
// forms, and a forged approval by the requester changes nothing; another
// person approves it from the queue.
func TestConsoleTwoPerson(t *testing.T) {
	t.Parallel()
	e := setupTwoPerson(t)
	id := e.insertInDoubt(t, "evt-two")
	alice := browserless(t)
	token := login(t, alice, e.srv.URL, aliceToken)
	_, page := get(t, alice, e.srv.URL+"/ui/intents/"+itoa(id))
	if !strings.Contains(page, `id="two-person"`) {
		t.Errorf("the intent page of a two-person channel does not say so:\n%s", page)
	}
	post(t, alice, e.srv.URL+"/ui/intents/"+itoa(id)+"/resolve", url.Values{"csrf": {token}, "as": {"skip"},
		"reason": {"customer refunded by hand"}, "event_id": {"evt-two"}})
	_, page = get(t, alice, e.srv.URL+"/ui/intents/"+itoa(id))
	if !strings.Contains(page, "Nothing changed yet: approval request 1 awaits a second person") || e.status(t, id) != "IN_DOUBT" {
		t.Fatalf("after the resolve form (status %s):\n%s", e.status(t, id), page)
	}
	_, page = get(t, alice, e.srv.URL+"/ui/approvals")
	if !strings.Contains(page, `id="request-1"`) || !strings.Contains(page, "Your own request") || strings.Contains(page, `action="/ui/approvals/1/approve"`) {
		t.Fatalf("the requester's queue: want the request, no approve form:\n%s", page)
	}
	resp, _ := post(t, alice, e.srv.URL+"/ui/approvals/1/approve", url.Values{"csrf": {token}, "reason": {"mine anyway"}})
	_, page = get(t, alice, e.srv.URL+"/ui/approvals")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(page, "not decided") || !strings.Contains(page, "who may not decide it") || e.status(t, id) != "IN_DOUBT" {
		t.Fatalf("a forged self-approval: %d, status %s:\n%s", resp.StatusCode, e.status(t, id), page)
	}

	bob := browserless(t)
	token = login(t, bob, e.srv.URL, bobToken)
	_, page = get(t, bob, e.srv.URL+"/ui/approvals")
	if !strings.Contains(page, `action="/ui/approvals/1/approve"`) || !strings.Contains(page, "customer refunded by hand") {
		t.Fatalf("another person's queue: want the approve form and the reason:\n%s", page)
	}
	post(t, bob, e.srv.URL+"/ui/approvals/1/approve", url.Values{"csrf": {token}, "reason": {"checked Twilio"}})
	_, page = get(t, bob, e.srv.URL+"/ui/approvals")
	if !strings.Contains(page, "Request 1 approved") || !strings.Contains(page, "No pending request") || e.status(t, id) != "SKIPPED" {
		t.Fatalf("after bob's approval (status %s):\n%s", e.status(t, id), page)
	}
	resp, _ = post(t, bob, e.srv.URL+"/ui/approvals/1/approve", url.Values{"reason": {"no csrf"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an approval without the CSRF token: %d, want 403", resp.StatusCode)
	}
}
