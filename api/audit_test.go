package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// foundProvider finds every effect it is asked about.
type foundProvider struct{}

func (foundProvider) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	return "", fmt.Errorf("not called")
}

func (foundProvider) Lookup(context.Context, string, json.RawMessage, map[string]string, time.Time, time.Time) (string, bool, error) {
	return "re_found", true, nil
}

// TestAuditOneShape: every path that writes effectd.audit (retry, cancel and
// resolve of one intent, a bulk action, an operator's reconcile through the
// dispatcher, a policy change, pause and resume) writes one shape: before and
// after hold exactly the subject's fields (an intent's status, attempts,
// provider_ref and next_attempt_at; a channel's paused, policy and
// policy_override), after also the facts of the change, and those agree with
// the reason and bulk_snapshot columns.
func TestAuditOneShape(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	d, err := dispatcher.New(e.pool, dispatcher.Config{Logger: slog.New(slog.DiscardHandler), Channels: []dispatcher.Channel{
		{Name: "refund", Kind: "stripe", Provider: foundProvider{}, Policy: policy.Default("stripe")}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(Config{Pool: e.pool, Reconciler: d, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Tokens: []Token{NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken)}})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h

	failed := e.insertIntent(t, "sms", "a-failed", statemachine.Failed)
	pending := e.insertIntent(t, "sms", "a-pending", statemachine.Pending)
	doubt := e.insertIntent(t, "refund", "a-doubt", statemachine.InDoubt)
	lookup := e.insertIntent(t, "refund", "a-lookup", statemachine.InDoubt)
	e.insertIntent(t, "hook", "a-bulk-1", statemachine.Failed)
	e.insertIntent(t, "hook", "a-bulk-2", statemachine.Failed)
	for _, c := range []struct{ method, path, body string }{
		{"POST", fmt.Sprintf("/v1/intents/%d/retry", failed), `{"reason":"provider fixed"}`},
		{"POST", fmt.Sprintf("/v1/intents/%d/cancel", pending), `{}`},
		{"POST", fmt.Sprintf("/v1/intents/%d/resolve", doubt), `{"as":"sent","provider_ref":"re_seen","reason":"in the dashboard"}`},
		{"POST", fmt.Sprintf("/v1/intents/%d/reconcile", lookup), ``},
		{"PATCH", "/v1/channels/sms/policy", `{"max_attempts": 3}`},
		{"POST", "/v1/channels/sms/pause", ``},
		{"POST", "/v1/channels/sms/resume", ``},
	} {
		status, body := e.do(t, c.method, c.path, adminToken, c.body)
		want(t, status, body, http.StatusOK)
	}
	status, body := e.do(t, "POST", "/v1/intents/bulk", adminToken, `{"action":"retry","filter":{"channel":"hook"},"reason":"storm over"}`)
	want(t, status, body, http.StatusOK, `"matched": 2`)
	var snap effectdtype.BulkSnapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	status, body = e.do(t, "POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", adminToken, ``)
	want(t, status, body, http.StatusOK, `"applied": 2`)

	intentKeys := []string{"attempts", "next_attempt_at", "provider_ref", "status"}
	channelKeys := []string{"paused", "policy", "policy_override"}
	change := []string{"force", "outcome", "reason", "snapshot"}
	rows, err := e.pool.Query(ctx, `SELECT action, intent_id IS NOT NULL, before, after, coalesce(reason, ''), coalesce(bulk_snapshot::text, '') FROM effectd.audit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	for rows.Next() {
		var action, reason, snapshot string
		var intent bool
		var before, after map[string]json.RawMessage
		if err := rows.Scan(&action, &intent, &before, &after, &reason, &snapshot); err != nil {
			t.Fatal(err)
		}
		seen[action]++
		subject := channelKeys
		if intent {
			subject = intentKeys
		}
		if got := slices.Sorted(maps.Keys(before)); !slices.Equal(got, subject) {
			t.Errorf("%s: before has %v, want %v", action, got, subject)
		}
		var extra []string
		for _, k := range slices.Sorted(maps.Keys(after)) {
			if !slices.Contains(subject, k) {
				extra = append(extra, k)
			}
		}
		for _, k := range subject {
			if _, ok := after[k]; !ok {
				t.Errorf("%s: after lacks %q: %v", action, k, slices.Sorted(maps.Keys(after)))
			}
		}
		for _, k := range extra {
			if !slices.Contains(change, k) {
				t.Errorf("%s: after has %q, neither the subject's nor a fact of the change", action, k)
			}
		}
		var inAfter struct{ Reason, Snapshot string }
		json.Unmarshal(mustJSON(t, after), &inAfter)
		if inAfter.Reason != reason || inAfter.Snapshot != snapshot {
			t.Errorf("%s: after says reason %q, snapshot %q; the columns %q, %q", action, inAfter.Reason, inAfter.Snapshot, reason, snapshot)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantSeen := map[string]int{"intent.requeue": 3, "intent.cancel": 1, "intent.resolve_sent": 1, "intent.reconcile": 1,
		"channel.policy": 1, "channel.pause": 1, "channel.resume": 1}
	if !maps.Equal(seen, wantSeen) {
		t.Errorf("audit entries by action %v, want %v", seen, wantSeen)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuditOldRows: entries written in the shapes of earlier versions (an
// operator's change with its reason only inside after, a reconcile with the
// status and attempts only) are shown as they were stored.
func TestAuditOldRows(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertIntent(t, "refund", "old-1", statemachine.Sent)
	old := []struct{ action, before, after string }{
		{"intent.resolve_sent", `{"status": "IN_DOUBT", "attempts": 1, "provider_ref": null, "next_attempt_at": "2026-01-01T00:00:00Z"}`,
			`{"status": "SENT", "attempts": 1, "provider_ref": "re_1", "next_attempt_at": "2026-01-01T00:00:00Z", "reason": "seen"}`},
		{"intent.reconcile", `{"status": "IN_DOUBT", "attempts": 1}`,
			`{"status": "SENT", "attempts": 1, "outcome": "found → SENT", "provider_ref": "re_1"}`},
	}
	for _, o := range old {
		fixture.AddAudit(t, e.pool, fixture.AuditEntry{Actor: "oncall", Action: o.action, IntentID: id, Channel: "refund",
			Before: o.before, After: o.after})
	}
	status, body := e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), adminToken, "")
	want(t, status, body, http.StatusOK)
	var d struct{ Audit []effectdtype.AuditEntry }
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Audit) != len(old) {
		t.Fatalf("%d audit entries shown, want %d: %s", len(d.Audit), len(old), body)
	}
	for i, o := range old {
		a := d.Audit[i]
		if a.Action != o.action || a.Actor != "oncall" || a.Reason != nil || compact(t, a.Before) != compact(t, []byte(o.before)) || compact(t, a.After) != compact(t, []byte(o.after)) {
			t.Errorf("entry %d shown as %+v (before %s, after %s), want %+v", i, a, a.Before, a.After, o)
		}
	}
}

// compact returns b as one line with its keys sorted, for comparing JSON.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(mustJSON(t, v)))
}
