package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// approvalEnv is setup with channel refund two-person and the tokens of the
// approval tests: alice and bob (operators of refund with the approve right
// on it), carol (an operator of refund without it) and sms-oncall (of sms,
// with the approve right on every channel it sees).
func approvalEnv(t *testing.T) env {
	t.Helper()
	e := setup(t)
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.channels SET policy = policy || '{"approval": "two-person"}' WHERE name = 'refund'`); err != nil {
		t.Fatal(err)
	}
	refund := []string{"refund"}
	h, err := NewHandler(Config{Pool: e.pool, Logger: slog.New(slog.DiscardHandler), Reconciler: e.recon,
		Registry: prometheus.NewRegistry(), Tokens: []Token{
			NewToken(Principal{Name: "alice", Role: RoleOperator, Channels: refund, Approves: refund}, "alice-secret"),
			NewToken(Principal{Name: "bob", Role: RoleOperator, Channels: refund, Approves: refund}, "bob-secret"),
			NewToken(Principal{Name: "carol", Role: RoleOperator, Channels: refund}, "carol-secret"),
			NewToken(Principal{Name: "sms-oncall", Role: RoleOperator, Channels: []string{"sms"}, Approves: []string{"*"}}, "sms-secret"),
			NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken)}})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

// request makes token ask for a resolve of intent id (shown as event) as
// body says, and returns the approval request's id.
func (e env) request(t *testing.T, token string, id int64, event, body string) int64 {
	t.Helper()
	status, b := e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/resolve?event_id=%s", id, event), token, body)
	want(t, status, b, http.StatusAccepted, `"approval_request"`, "needs a second person")
	var out approvalRequested
	if err := json.Unmarshal([]byte(b), &out); err != nil || out.Request.ID == 0 || out.Request.State != effectdtype.ApprovalPending {
		t.Fatalf("answer %s: %v", b, err)
	}
	return out.Request.ID
}

// status reads an intent's status and its audit entries' count.
func (e env) status(t *testing.T, id int64) (string, int) {
	t.Helper()
	var st string
	var audits int
	if err := e.pool.QueryRow(context.Background(), `SELECT status, (SELECT count(*) FROM effectd.audit WHERE intent_id = $1) FROM effectd.intents WHERE id = $1`, id).Scan(&st, &audits); err != nil {
		t.Fatal(err)
	}
	return st, audits
}

// TestApprovalAccess: on a two-person channel a resolve is a request; its
// requester, a person without the approve right and another team are
// refused (403, 403, 404 as for a missing request) and change nothing;
// another person approves, and the audit names both.
func TestApprovalAccess(t *testing.T) {
	t.Parallel()
	e := approvalEnv(t)
	id := e.insertIntent(t, "refund", "rf-1", statemachine.InDoubt)
	req := e.request(t, "alice-secret", id, "rf-1", `{"as":"skip","reason":"refunded by hand"}`)
	if st, audits := e.status(t, id); st != "IN_DOUBT" || audits != 0 {
		t.Fatalf("a request changed the intent: %s, %d audit entries", st, audits)
	}
	path := fmt.Sprintf("/v1/approvals/%d/approve", req)

	status, body := e.do(t, "POST", path, "alice-secret", `{"reason":"looks fine to me"}`)
	want(t, status, body, http.StatusForbidden, `"self_approval"`, `made by \"alice\", who may not decide it`)
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/approvals/%d/reject", req), "alice-secret", `{"reason":"withdrawn"}`)
	want(t, status, body, http.StatusForbidden, `"self_approval"`)
	status, body = e.do(t, "POST", path, "carol-secret", `{"reason":"ok"}`)
	want(t, status, body, http.StatusForbidden, `holds no approve right on channel \"refund\"`)
	status, body = e.do(t, "POST", path, "sms-secret", `{"reason":"ok"}`)
	mStatus, mBody := e.do(t, "POST", "/v1/approvals/424242/approve", "sms-secret", `{"reason":"ok"}`)
	if status != http.StatusNotFound || status != mStatus || strings.ReplaceAll(body, fmt.Sprint(req), "424242") != mBody {
		t.Errorf("another team's request: %d %s, want as a missing one: %d %s", status, body, mStatus, mBody)
	}
	if _, body := e.do(t, "GET", "/v1/approvals", "sms-secret", ""); strings.Contains(body, "rf-1") {
		t.Errorf("another team lists the request: %s", body)
	}
	status, body = e.do(t, "POST", path, "bob-secret", `{}`)
	want(t, status, body, http.StatusUnprocessableEntity, "reason: required")
	if st, audits := e.status(t, id); st != "IN_DOUBT" || audits != 0 {
		t.Fatalf("refused decisions changed the intent: %s, %d audit entries", st, audits)
	}

	status, body = e.do(t, "GET", "/v1/approvals?channel=refund", "bob-secret", "")
	want(t, status, body, http.StatusOK, `"requester": "alice"`, `"event_id": "rf-1"`)
	status, body = e.do(t, "POST", path, "bob-secret", `{"reason":"checked the Stripe dashboard"}`)
	want(t, status, body, http.StatusOK, `"state": "approved"`, `"decider": "bob"`, "IN_DOUBT → SKIPPED")
	status, body = e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), "bob-secret", "")
	want(t, status, body, http.StatusOK, `"actor": "bob"`, `"requested_by": "alice"`, `"approved_by": "bob"`, `"status": "SKIPPED"`)
	status, body = e.do(t, "POST", path, "bob-secret", `{"reason":"again"}`)
	want(t, status, body, http.StatusConflict, "approved already")
}

// TestApprovalRefusals: an intent that moved on since the request is left as
// it is (409, the request failed); an expired request cannot be approved
// (410); a forced retry and a policy change are requests too; malformed ids
// and bodies are 4xx naming what is wrong.
func TestApprovalRefusals(t *testing.T) {
	t.Parallel()
	e := approvalEnv(t)
	moved := e.insertIntent(t, "refund", "rf-moved", statemachine.InDoubt)
	req := e.request(t, "alice-secret", moved, "rf-moved", `{"as":"sent","provider_ref":"re_1","reason":"found it"}`)
	status, body := e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/retry", moved), "carol-secret", `{"reason":"try again"}`)
	want(t, status, body, http.StatusOK, `"status": "PENDING"`)
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/approvals/%d/approve", req), "bob-secret", `{"reason":"ok"}`)
	want(t, status, body, http.StatusConflict, "failed, nothing changed", "changed since")
	if st, audits := e.status(t, moved); st != "PENDING" || audits != 1 {
		t.Errorf("a moved-on intent after the approval: %s, %d audit entries; want PENDING and the retry's alone", st, audits)
	}
	_, body = e.do(t, "GET", fmt.Sprintf("/v1/approvals/%d", req), "bob-secret", "")
	want(t, http.StatusOK, body, http.StatusOK, `"state": "failed"`)

	old := e.insertIntent(t, "refund", "rf-old", statemachine.InDoubt)
	req = e.request(t, "alice-secret", old, "rf-old", `{"as":"skip","reason":"r"}`)
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.approval_requests SET created_at = now() - interval '2 days', expires_at = now() - interval '1 day' WHERE id = $1`, req); err != nil {
		t.Fatal(err)
	}
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/approvals/%d/approve", req), "bob-secret", `{"reason":"ok"}`)
	want(t, status, body, http.StatusGone, `"expired"`, "ask again")
	if st, audits := e.status(t, old); st != "IN_DOUBT" || audits != 0 {
		t.Errorf("an expired request's intent: %s, %d audit entries", st, audits)
	}

	forced := e.insertIntent(t, "refund", "rf-forced", statemachine.InDoubt)
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/retry", forced), "alice-secret", `{"force":true,"reason":"past the window"}`)
	want(t, status, body, http.StatusAccepted, `"action": "intent.requeue"`, `"force": true`)
	status, body = e.do(t, "PATCH", "/v1/channels/refund/policy", adminToken, `{"approval":"none"}`)
	want(t, status, body, http.StatusUnprocessableEntity, "reason: required")
	status, body = e.do(t, "PATCH", "/v1/channels/refund/policy?reason=pilot+over", adminToken, `{"approval":"none"}`)
	want(t, status, body, http.StatusAccepted, `"action": "channel.policy"`)

	for _, c := range []struct {
		method, path, body string
		status             int
		mention            string
	}{
		{"GET", "/v1/approvals/abc", "", http.StatusBadRequest, "id must be a positive integer"},
		{"GET", "/v1/approvals?limit=abc", "", http.StatusUnprocessableEntity, "limit"},
		{"POST", "/v1/approvals/1/approve", `[1]`, http.StatusBadRequest, "JSON object"},
		{"POST", "/v1/approvals/1/approve", `{"reason":"` + strings.Repeat("x", 1001) + `"}`, http.StatusUnprocessableEntity, "reason"},
		{"POST", "/v1/approvals/999999/approve", `{"reason":"x"}`, http.StatusNotFound, "approval request 999999"},
	} {
		status, body := e.do(t, c.method, c.path, "bob-secret", c.body)
		if status != c.status || !strings.Contains(body, c.mention) {
			t.Errorf("%s %s: %d %s, want %d naming %q", c.method, c.path, status, body, c.status, c.mention)
		}
	}
}
