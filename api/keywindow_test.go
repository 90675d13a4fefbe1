package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/effectd/effectd/statemachine"
)

// TestRetryPastKeyWindow: retry and resend of a Stripe intent that may have
// been applied, 25 hours old, answer 409 naming the way out; force needs a
// reason; force with a reason applies and is audited.
func TestRetryPastKeyWindow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	doubt := e.insertIntent(t, "refund", "old-doubt", statemachine.InDoubt)
	stuck := e.insertIntent(t, "refund", "old-stuck", statemachine.Sending)
	if _, err := e.pool.Exec(ctx, `UPDATE effectd.intents SET created_at = now() - interval '25 hours' WHERE id IN ($1, $2)`, doubt, stuck); err != nil {
		t.Fatal(err)
	}
	retry := fmt.Sprintf("/v1/intents/%d/retry", doubt)
	status, body := e.do(t, "POST", retry, adminToken, "")
	want(t, status, body, http.StatusConflict, "idempotency-key window", "force")
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/resolve", stuck), adminToken, `{"as":"resend","reason":"lease long gone"}`)
	want(t, status, body, http.StatusConflict, "idempotency-key window")
	status, body = e.do(t, "POST", retry, adminToken, `{"force":true}`)
	want(t, status, body, http.StatusUnprocessableEntity, "reason")
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/resolve", stuck), adminToken, `{"as":"skip","force":true,"reason":"x"}`)
	want(t, status, body, http.StatusUnprocessableEntity, "force")
	status, body = e.do(t, "POST", retry, adminToken, `{"force":true,"reason":"no refund on pi_1 in the dashboard"}`)
	want(t, status, body, http.StatusOK)
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/resolve", stuck), adminToken, `{"as":"resend","force":true,"reason":"checked by hand"}`)
	want(t, status, body, http.StatusOK)
	var forced int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE (after->>'force')::bool AND intent_id IN ($1, $2)`, doubt, stuck).Scan(&forced); err != nil || forced != 2 {
		t.Fatalf("audit entries recording force = %d, %v; want 2", forced, err)
	}
}
