package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/statemachine"
)

// TestOutOfScopeIsNotFound: every route that names something a scope owns (an
// intent, a channel, a bulk snapshot) answers a principal out of scope exactly
// as it answers for one that does not exist, and changes nothing.
func TestOutOfScopeIsNotFound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	h, err := NewHandler(Config{Pool: e.pool, Logger: slog.New(slog.DiscardHandler), Reconciler: e.recon,
		Registry: prometheus.NewRegistry(), Tokens: []Token{
			NewToken(Principal{Name: "sms-oncall", Role: RoleOperator, Channels: []string{"sms"}}, "sms-secret"),
			NewToken(Principal{Name: "payments-oncall", Role: RoleOperator, Channels: []string{"refund"}}, "payments-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	api := env{pool: e.pool, h: h}
	pending := e.insertIntent(t, "refund", "r-pending", statemachine.Pending)
	inDoubt := e.insertIntent(t, "refund", "r-doubt", statemachine.InDoubt)
	status, body := api.do(t, "POST", "/v1/intents/bulk", "payments-secret", `{"action":"resolve","as":"skip","reason":"r"}`)
	want(t, status, body, http.StatusOK, `"matched": 1`)
	snap := body[strings.Index(body, `"snapshot": "`)+13:][:36]

	const missingID, missingSnap = "424242", "00000000-0000-0000-0000-000000000000"
	routes := []struct{ method, path, body, hidden, missing string }{
		{"GET", "/v1/intents/%s", "", fmt.Sprint(pending), missingID},
		{"POST", "/v1/intents/%s/retry", "", fmt.Sprint(inDoubt), missingID},
		{"POST", "/v1/intents/%s/cancel", "", fmt.Sprint(pending), missingID},
		{"POST", "/v1/intents/%s/resolve", `{"as":"skip","reason":"r"}`, fmt.Sprint(inDoubt), missingID},
		{"POST", "/v1/intents/%s/reconcile", "", fmt.Sprint(inDoubt), missingID},
		{"POST", "/v1/intents/%s/reconcile?dry_run=true", "", fmt.Sprint(inDoubt), missingID},
		{"GET", "/v1/channels/%s", "", "refund", "nope"},
		{"POST", "/v1/channels/%s/pause", "", "refund", "nope"},
		{"POST", "/v1/channels/%s/resume", "", "refund", "nope"},
		{"PATCH", "/v1/channels/%s/policy", `{"max_attempts":3}`, "refund", "nope"},
		{"POST", "/v1/intents/bulk", `{"action":"retry","filter":{"channel":"%s"},"reason":"r"}`, "refund", "nope"},
		{"POST", "/v1/intents/bulk/%s/apply", "", snap, missingSnap},
		{"POST", "/v1/sweeps", `{"channel":"%s","since":"2026-11-30T12:00:00Z"}`, "refund", "nope"},
	}
	for _, r := range routes {
		call := func(name string) (int, string) {
			path, body := r.path, r.body
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, name)
			} else {
				body = fmt.Sprintf(body, name)
			}
			return api.do(t, r.method, path, "sms-secret", body)
		}
		status, body := call(r.hidden)
		mStatus, mBody := call(r.missing)
		if status != http.StatusNotFound || status != mStatus || strings.ReplaceAll(body, r.hidden, r.missing) != mBody {
			t.Errorf("%s %s out of scope: %d %s\nwant what a missing one gets: %d %s", r.method, r.path, status, body, mStatus, mBody)
		}
	}
	// Lists filtered by something out of scope show as little as for something missing.
	for _, q := range []string{"/v1/provider-events?intent_id=%s", "/v1/intents?channel=%s"} {
		_, b := api.do(t, "GET", fmt.Sprintf(q, fmt.Sprint(pending)), "sms-secret", "")
		_, mb := api.do(t, "GET", fmt.Sprintf(q, missingID), "sms-secret", "")
		if b != mb {
			t.Errorf("GET %s out of scope: %s, want %s", q, b, mb)
		}
	}

	var audited, snaps, paused int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit`).Scan(&audited)
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.bulk_snapshots WHERE applied_at IS NOT NULL OR actor <> 'payments-oncall'`).Scan(&snaps)
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.channels WHERE paused OR policy_override <> '{}'`).Scan(&paused)
	if audited != 0 || snaps != 0 || paused != 0 || len(e.recon.calls) != 0 {
		t.Errorf("refused requests changed something: %d audit entries, %d snapshots made or applied, %d channels changed, %d reconciles",
			audited, snaps, paused, len(e.recon.calls))
	}
	for id, st := range map[int64]string{pending: "PENDING", inDoubt: "IN_DOUBT"} {
		var now string
		e.pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&now)
		if now != st {
			t.Errorf("intent %d is %s, want %s", id, now, st)
		}
	}
}
