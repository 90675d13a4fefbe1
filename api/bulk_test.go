package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// TestBulkSnapshotThenApply: a snapshot freezes the matching rows and changes
// nothing; the apply changes exactly the frozen rows still in their frozen
// state, skips the ones that moved, and audits each with the snapshot and reason.
func TestBulkSnapshotThenApply(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var failed []int64
	for i := range 5 {
		failed = append(failed, e.insertIntent(t, "sms", fmt.Sprintf("storm-%d", i), statemachine.Failed))
	}
	other := e.insertIntent(t, "refund", "storm-9", statemachine.Failed)       // another channel
	pending := e.insertIntent(t, "sms", "storm-pending", statemachine.Pending) // retry does not apply
	skipped := e.insertIntent(t, "sms", "calm-1", statemachine.Failed)         // another prefix

	status, body := e.do(t, "POST", "/v1/intents/bulk", adminToken,
		`{"action":"retry","filter":{"channel":"sms","event_id_prefix":"storm-"},"reason":"429 storm over"}`)
	want(t, status, body, http.StatusOK)
	var snap effectdtype.BulkSnapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Matched != 5 || len(snap.Sample) != 5 || snap.More || snap.Snapshot == "" {
		t.Fatalf("snapshot: %+v, want 5 matched and sampled", snap)
	}
	for i, s := range snap.Sample {
		if s.ID != failed[i] || s.Status != statemachine.Failed {
			t.Errorf("sample %d: intent %d %s, want %d FAILED", i, s.ID, s.Status, failed[i])
		}
	}
	var changed int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status <> 'FAILED' AND id <> $1`, pending).Scan(&changed)
	if changed != 0 {
		t.Fatalf("the snapshot changed %d intents", changed)
	}

	// Between snapshot and apply, someone retries one row by hand, and it fails
	// again: FAILED as frozen, but one attempt on. Retrying it again would send
	// it once more than anyone decided, so apply must skip it.
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/retry", failed[0]), adminToken, "")
	want(t, status, body, http.StatusOK)
	if _, err := e.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'FAILED', attempts = attempts + 1 WHERE id = $1`, failed[0]); err != nil {
		t.Fatal(err)
	}

	status, body = e.do(t, "POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", adminToken, "")
	want(t, status, body, http.StatusOK)
	var res effectdtype.BulkResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	if res.Applied != 4 || res.Skipped != 1 {
		t.Fatalf("apply: %+v, want 4 applied and 1 skipped", res)
	}
	for _, id := range []int64{other, skipped, failed[0]} {
		var st string
		e.pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&st)
		if st != "FAILED" {
			t.Errorf("intent %d (outside the filter, or changed since the snapshot) is %s, want FAILED", id, st)
		}
	}
	var audited int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE bulk_snapshot = $1 AND reason = '429 storm over'
		AND action = 'intent.requeue' AND actor = 'admin'`, snap.Snapshot).Scan(&audited)
	if audited != 4 {
		t.Errorf("%d audit entries carry the snapshot and reason, want 4", audited)
	}
	// The row moved by hand was requeued once, by hand: attempts tell the two apart.
	var n int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE intent_id = $1`, failed[0]).Scan(&n)
	if n != 1 {
		t.Errorf("intent %d has %d audit entries, want 1 (the manual retry only)", failed[0], n)
	}

	// A snapshot is applied once.
	status, body = e.do(t, "POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", adminToken, "")
	want(t, status, body, http.StatusConflict, "already applied")
}

func TestBulkBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.insertIntent(t, "sms", "a", statemachine.InDoubt)
	tests := []struct {
		body    string
		status  int
		mention string
	}{
		{`{"action":"retry","filter":{"status":"FAILED"}}`, 422, "reason"},
		{`{"action":"retry","reason":"  "}`, 422, "reason"},
		{`{"action":"retry","reason":"` + strings.Repeat("x", 1001) + `"}`, 422, "reason"},
		{`{"action":"delete","reason":"r"}`, 422, "action"},
		{`{"action":"resolve","as":"sent","reason":"r"}`, 422, "as"},
		{`{"action":"resolve","reason":"r"}`, 422, "as"},
		{`{"action":"cancel","as":"skip","reason":"r"}`, 422, "as"},
		{`{"action":"cancel","filter":{"status":"FAILED"},"reason":"r"}`, 422, "filter.status"},
		{`{"action":"retry","filter":{"state":"FAILED"},"reason":"r"}`, 400, "state"},
		{`{"action":"retry","filter":{"channel":"a\u0000"},"reason":"r"}`, 400, "filter.channel"},
		{`[]`, 400, "JSON object"},
	}
	for _, tc := range tests {
		status, body := e.do(t, "POST", "/v1/intents/bulk", adminToken, tc.body)
		if status != tc.status || !strings.Contains(body, tc.mention) {
			t.Errorf("%.60s: %d %s, want %d naming %q", tc.body, status, body, tc.status, tc.mention)
		}
	}
	var snaps int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.bulk_snapshots`).Scan(&snaps)
	if snaps != 0 {
		t.Errorf("%d snapshots recorded from bad requests", snaps)
	}
	status, body := e.do(t, "POST", "/v1/intents/bulk/not-a-uuid/apply", adminToken, "")
	want(t, status, body, http.StatusNotFound)
	status, body = e.do(t, "POST", "/v1/intents/bulk/00000000-0000-0000-0000-000000000000/apply", adminToken, "")
	want(t, status, body, http.StatusNotFound)
}

// TestBulkExpiredAndCapped: an expired snapshot is refused and changes
// nothing; a filter matching more than the limit freezes the first 10,000.
func TestBulkExpiredAndCapped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fixture.Intents(t, e.pool, 10005, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Channel("hook"), fixture.Event(fmt.Sprintf("bulk-%d", g)), fixture.Status("IN_DOUBT")}
	})
	status, body := e.do(t, "POST", "/v1/intents/bulk", adminToken, `{"action":"resolve","as":"skip","reason":"drill"}`)
	want(t, status, body, http.StatusOK, `"matched": 10000`, `"more": true`)
	var snap effectdtype.BulkSnapshot
	json.Unmarshal([]byte(body), &snap)
	if len(snap.Sample) != operator.BulkSample {
		t.Errorf("sample of %d, want %d", len(snap.Sample), operator.BulkSample)
	}
	var frozen, maxID int64
	e.pool.QueryRow(ctx, `SELECT count(*), max(intent_id) FROM effectd.bulk_rows WHERE snapshot = $1`, snap.Snapshot).Scan(&frozen, &maxID)
	var want10000th int64
	e.pool.QueryRow(ctx, `SELECT id FROM effectd.intents ORDER BY id OFFSET 9999 LIMIT 1`).Scan(&want10000th)
	if frozen != operator.MaxBulk || maxID != want10000th {
		t.Errorf("froze %d rows up to id %d, want %d up to %d", frozen, maxID, operator.MaxBulk, want10000th)
	}

	e.pool.Exec(ctx, `UPDATE effectd.bulk_snapshots SET expires_at = now() - interval '1 second' WHERE id = $1`, snap.Snapshot)
	status, body = e.do(t, "POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", adminToken, "")
	want(t, status, body, http.StatusConflict, "expired")
	var inDoubt int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'IN_DOUBT'`).Scan(&inDoubt)
	if inDoubt != 10005 {
		t.Errorf("%d IN_DOUBT after an expired apply, want 10005", inDoubt)
	}
}

// TestBulkScoped: an operator scoped to some channels freezes only their
// intents, and a filter naming another channel answers 404.
func TestBulkScoped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h, err := NewHandler(Config{Pool: e.pool, Logger: slog.New(slog.DiscardHandler),
		Tokens: []Token{NewToken(Principal{Name: "refunds-oncall", Role: RoleOperator, Channels: []string{"ref*"}}, "scoped-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	scoped := env{pool: e.pool, h: h}
	e.insertIntent(t, "sms", "x-1", statemachine.Failed)
	mine := e.insertIntent(t, "refund", "x-2", statemachine.Failed)
	status, body := scoped.do(t, "POST", "/v1/intents/bulk", "scoped-secret", `{"action":"retry","filter":{"channel":"sms"},"reason":"r"}`)
	want(t, status, body, http.StatusNotFound)
	status, body = scoped.do(t, "POST", "/v1/intents/bulk", "scoped-secret", `{"action":"retry","reason":"r"}`)
	want(t, status, body, http.StatusOK, `"matched": 1`, fmt.Sprintf(`"id": %d`, mine))
}

// TestBulkApplyOutOfScope: a snapshot is applied only by a principal that sees
// every channel it may touch. Another team's token gets the very 404 a missing
// snapshot gets, whatever the snapshot's state (open, applied, expired), and
// changes nothing: the intents keep their state and the snapshot stays
// applicable by its owner.
func TestBulkApplyOutOfScope(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	h, err := NewHandler(Config{Pool: e.pool, Logger: slog.New(slog.DiscardHandler), Tokens: []Token{
		NewToken(Principal{Name: "payments-oncall", Role: RoleOperator, Channels: []string{"ref*"}}, "payments-secret"),
		NewToken(Principal{Name: "sms-oncall", Role: RoleOperator, Channels: []string{"sms"}}, "sms-secret"),
		NewToken(Principal{Name: "both-oncall", Role: RoleOperator, Channels: []string{"refund", "sms"}}, "both-secret"),
		NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken)}})
	if err != nil {
		t.Fatal(err)
	}
	api := env{pool: e.pool, h: h}
	refund := e.insertIntent(t, "refund", "r-1", statemachine.Failed)
	sms := e.insertIntent(t, "sms", "s-1", statemachine.Failed)
	snapshot := func(token, body string) string {
		t.Helper()
		status, b := api.do(t, "POST", "/v1/intents/bulk", token, body)
		want(t, status, b, http.StatusOK)
		var snap effectdtype.BulkSnapshot
		if err := json.Unmarshal([]byte(b), &snap); err != nil {
			t.Fatal(err)
		}
		return snap.Snapshot
	}
	const missing = "00000000-0000-0000-0000-000000000000"
	_, missingBody := api.do(t, "POST", "/v1/intents/bulk/"+missing+"/apply", "sms-secret", "")
	refused := func(token, id string) {
		t.Helper()
		status, b := api.do(t, "POST", "/v1/intents/bulk/"+id+"/apply", token, "")
		if status != http.StatusNotFound || strings.ReplaceAll(b, id, missing) != missingBody {
			t.Errorf("apply %s by %s: %d %s, want the 404 of a missing snapshot: %s", id, token, status, b, missingBody)
		}
	}
	unchanged := func(id string) {
		t.Helper()
		var applied *string
		e.pool.QueryRow(ctx, `SELECT applied_by FROM effectd.bulk_snapshots WHERE id = $1`, id).Scan(&applied)
		var failed int
		e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'FAILED' AND id IN ($1, $2)`, refund, sms).Scan(&failed)
		if applied != nil || failed != 2 {
			t.Errorf("snapshot %s applied by %v, %d of 2 intents still FAILED: a refused apply changed something", id, applied, failed)
		}
	}

	// The payment team's snapshot: the SMS team may not apply it.
	mine := snapshot("payments-secret", `{"action":"retry","reason":"gateway back"}`)
	refused("sms-secret", mine)
	unchanged(mine)
	// An admin's snapshot over every channel is out of every scoped team's reach,
	// even one that sees every channel it happened to freeze.
	all := snapshot(adminToken, `{"action":"retry","filter":{"channel":"refund"},"reason":"r"}`)
	refused("sms-secret", all)
	every := snapshot(adminToken, `{"action":"retry","reason":"r"}`)
	refused("payments-secret", every)
	refused("both-secret", every)
	unchanged(every)

	// A team that sees the snapshot's channels may apply it; the owner can still.
	status, b := api.do(t, "POST", "/v1/intents/bulk/"+mine+"/apply", "payments-secret", "")
	want(t, status, b, http.StatusOK, `"applied": 1`, `"skipped": 0`)
	// Applied or expired, it stays hidden from the other team: 404, not 409.
	refused("sms-secret", mine)
	e.pool.Exec(ctx, `UPDATE effectd.bulk_snapshots SET expires_at = now() - interval '1 second' WHERE id = $1`, all)
	refused("sms-secret", all)
	status, b = api.do(t, "POST", "/v1/intents/bulk/"+all+"/apply", "both-secret", "")
	want(t, status, b, http.StatusConflict, "expired")
}
