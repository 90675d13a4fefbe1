package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/openapitest"
	"github.com/effectd/effectd/statemachine"
)

// TestAnswersMatchOpenAPI drives the real handler over every route, as an
// admin, an operator and viewers scoped to channels that redact fields, and
// validates every answer (masked ones, errors and the 200s of every
// operation) against openapi.yaml's response schemas with kin-openapi.
func TestAnswersMatchOpenAPI(t *testing.T) {
	t.Parallel()
	spec := openapitest.Load(t, "openapi.yaml")
	e := setup(t)
	ctx := context.Background()
	const (
		smsViewer   = "sms-viewer-0123456789"
		smsOperator = "sms-operator-0123456789"
		number      = "+15005550006"
		refundLead  = "refund-lead-0123456789"
	)
	// sms and sms-otp redact the number; outcomes of sms are told on
	// sms-notify, whose notifications embed the source intent.
	fixture.AddChannel(t, e.pool, "sms-otp", "twilio", fixture.Redact("to"))
	fixture.AddChannel(t, e.pool, "sms-notify", "webhook")
	if _, err := e.pool.Exec(ctx, `
UPDATE effectd.channels SET redact = '{to,body}',
  notify = '{"channel": "sms-notify", "on": ["sent", "failed", "skipped", "cancelled", "undelivered"]}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	id := map[string]int64{}
	for _, in := range []struct {
		channel, event string
		s              statemachine.State
	}{
		{"sms", "pending", statemachine.Pending}, {"sms", "failed", statemachine.Failed},
		{"sms", "in-doubt", statemachine.InDoubt}, {"sms", "sending", statemachine.Sending},
		{"sms", "sent", statemachine.Sent}, {"sms-otp", "failed", statemachine.Failed},
		{"sms-otp", "pending", statemachine.Pending}, {"refund", "in-doubt", statemachine.InDoubt},
		{"hook", "pending", statemachine.Pending},
	} {
		id[in.channel+"/"+in.event] = e.insertIntent(t, in.channel, in.event, in.s)
	}
	quote := "Twilio 21211: " + number + " is not a valid phone number"
	for _, q := range []string{
		`UPDATE effectd.intents SET last_error = $1 WHERE status = 'FAILED' AND $2::bigint > 0`,
		`UPDATE effectd.intents SET provider_ref = 'SM1', delivery = 'undelivered', delivery_detail = 'undelivered 30003',
		   delivery_at = now() WHERE id = $2 AND $1::text <> ''`,
	} {
		if _, err := e.pool.Exec(ctx, q, quote, id["sms/sent"]); err != nil {
			t.Fatal(err)
		}
	}
	fixture.AddAttempts(t, e.pool,
		fixture.Attempt{IntentID: id["sms/failed"], Outcome: "failed", Error: quote},
		fixture.Attempt{IntentID: id["sms-otp/failed"], Outcome: "failed", Error: quote})
	fixture.AddProviderEvents(t, e.pool,
		fixture.ProviderEvent{Provider: "twilio", EventID: "SM1:undelivered", Channel: "sms", IntentID: id["sms/sent"], ObjectRef: "SM1",
			Type: "undelivered", Status: "undelivered", Delivery: "undelivered", Detail: "undelivered 30003", Outcome: "applied",
			Payload: `{"MessageSid": "SM1", "MessageStatus": "undelivered", "To": "` + number + `"}`},
		fixture.ProviderEvent{Provider: "twilio", EventID: "SM9:sent", Channel: "sms-otp", ObjectRef: "SM9", Type: "sent",
			Status: "sent", Delivery: "accepted", Detail: "sent", Outcome: "orphan", Payload: `{"To": "` + number + `"}`},
		fixture.ProviderEvent{Provider: "stripe", EventID: "evt_1", Channel: "refund", ObjectRef: "re_9", Type: "refund.created",
			Status: "succeeded", Delivery: "delivered", Detail: "succeeded", Outcome: "orphan", Payload: `{"id": "evt_1"}`})
	h, err := NewHandler(Config{
		Pool: e.pool,
		Tokens: []Token{
			NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken),
			NewToken(Principal{Name: "read", Role: RoleViewer}, readToken),
			NewToken(Principal{Name: "sms-viewer", Role: RoleViewer, Channels: []string{"sms*"}}, smsViewer),
			NewToken(Principal{Name: "sms-operator", Role: RoleOperator, Channels: []string{"sms*"}}, smsOperator),
			NewToken(Principal{Name: "refund-lead", Role: RoleOperator, Approves: []string{"refund"}}, refundLead),
		},
		Reconciler: e.recon,
		Sweeper:    fakeSweeper{},
		Registry:   prometheus.NewRegistry(),
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}

	// check sends one request, validates its answer and returns it.
	answered := map[string][]int{} // operation → statuses validated
	check := func(method, target, token, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		op, err := spec.CheckResponse(req, rec.Code, rec.Result().Header, b)
		if err != nil {
			t.Errorf("token %.8s…: %v", token, err)
		}
		answered[op] = append(answered[op], rec.Code)
		return rec.Code, string(b)
	}
	expect := func(wantStatus int) func(int, string) {
		return func(status int, body string) {
			t.Helper()
			if status != wantStatus {
				t.Errorf("status %d, want %d: %s", status, wantStatus, body)
			}
		}
	}
	ok := expect(http.StatusOK)
	intent := func(key string) string { return fmt.Sprint("/v1/intents/", id[key]) }

	// Writes that succeed, so that every operation's 200 is checked and the
	// intents gain audit entries (before/after) and notifications.
	ok(check("POST", intent("sms/failed")+"/retry", smsOperator, `{"reason":"number fixed"}`))
	ok(check("POST", intent("sms/pending")+"/cancel", adminToken, `{"reason":"duplicate"}`))
	ok(check("POST", intent("sms/in-doubt")+"/resolve", smsOperator, `{"as":"sent","provider_ref":"SM2","reason":"seen in Twilio's console"}`))
	ok(check("POST", intent("refund/in-doubt")+"/reconcile?dry_run=true", adminToken, ""))
	ok(check("POST", intent("refund/in-doubt")+"/reconcile", adminToken, ""))
	ok(check("POST", "/v1/channels/sms/pause", smsOperator, ""))
	ok(check("POST", "/v1/channels/sms/resume", adminToken, ""))
	ok(check("PATCH", "/v1/channels/sms/policy", adminToken, `{"max_attempts": 3, "backoff": {"base": "2s"}, "delivery_poll": ["1m", "1h"]}`))
	ok(check("PATCH", "/v1/channels/sms-otp/policy", adminToken, `{"max_attempts": null}`))
	status, body := check("POST", "/v1/intents/bulk", smsOperator, `{"action":"cancel","reason":"campaign stopped","filter":{"channel":"sms-otp"}}`)
	ok(status, body)
	var snap struct{ Snapshot string }
	json.Unmarshal([]byte(body), &snap)
	ok(check("POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", smsOperator, ""))
	ok(check("POST", intent("sms/failed")+"/cancel", adminToken, `{"reason":"given up"}`))
	ok(check("POST", "/v1/sweeps", smsOperator, `{"channel":"sms","since":"2026-11-30T12:00:00Z","until":"2026-11-30T13:00:00Z"}`))

	// Two-person approval: refund's resolves become requests (202), which
	// refund-lead approves or rejects.
	if _, err := e.pool.Exec(ctx, `UPDATE effectd.channels SET policy = policy || '{"approval": "two-person"}' WHERE name = 'refund'`); err != nil {
		t.Fatal(err)
	}
	for i, decision := range []string{"approve", "reject"} {
		in := e.insertIntent(t, "refund", "to-"+decision, statemachine.InDoubt)
		status, body := check("POST", fmt.Sprintf("/v1/intents/%d/resolve", in), adminToken, `{"as":"skip","reason":"refunded by hand"}`)
		expect(http.StatusAccepted)(status, body)
		if i == 0 {
			ok(check("GET", "/v1/approvals?channel=refund", refundLead, ""))
			ok(check("GET", "/v1/approvals/1", refundLead, ""))
		}
		ok(check("POST", fmt.Sprintf("/v1/approvals/%d/%s", i+1, decision), refundLead, `{"reason":"checked"}`))
	}

	// Reads, by every token: the viewers' answers are masked.
	var notifications []string
	rows, _ := e.pool.Query(ctx, `SELECT id FROM effectd.intents WHERE channel = 'sms-notify' ORDER BY id`)
	for rows.Next() {
		var n int64
		rows.Scan(&n)
		notifications = append(notifications, fmt.Sprint("/v1/intents/", n))
	}
	if rows.Err() != nil || len(notifications) == 0 {
		t.Fatalf("no notification on sms-notify (%v): the masked copies would go unchecked", rows.Err())
	}
	reads := []string{"/healthz", "/readyz", "/metrics", "/v1/intents", "/v1/intents?channel=sms&limit=2",
		"/v1/intents?status=FAILED", "/v1/intents?delivery=undelivered", "/v1/intents?q=SM1",
		"/v1/channels", "/v1/channels/sms", "/v1/channels/sms-otp", "/v1/stats",
		"/v1/provider-events", "/v1/provider-events?orphan=true", "/v1/provider-events?channel=sms&limit=1",
		"/v1/charts", "/v1/charts?range=7d", "/v1/charts?channel=sms&range=24h"}
	for key := range id {
		reads = append(reads, intent(key))
	}
	reads = append(reads, notifications...)
	slices.Sort(reads)
	for _, token := range []string{adminToken, smsOperator, readToken, smsViewer} {
		for _, target := range reads {
			status, body := check("GET", target, token, "")
			if status != http.StatusOK && !(status == http.StatusNotFound && (token == smsViewer || token == smsOperator)) {
				t.Errorf("GET %s with token %.8s…: %d %s", target, token, status, body)
			}
		}
	}

	// Errors: each documented error status of the routes, as answered.
	expect(http.StatusUnauthorized)(check("GET", "/v1/intents", "", ""))
	expect(http.StatusBadRequest)(check("GET", "/v1/intents/x", smsViewer, ""))
	expect(http.StatusNotFound)(check("GET", intent("refund/in-doubt"), smsViewer, ""))
	expect(http.StatusNotFound)(check("GET", "/v1/channels/refund", smsViewer, ""))
	expect(http.StatusNotFound)(check("GET", "/v1/charts?channel=refund", smsViewer, ""))
	expect(http.StatusNotFound)(check("GET", "/v1/charts?channel=nosuch", adminToken, ""))
	expect(http.StatusUnprocessableEntity)(check("GET", "/v1/charts?range=1y", smsViewer, ""))
	expect(http.StatusUnprocessableEntity)(check("GET", "/v1/intents?limit=0", adminToken, ""))
	expect(http.StatusUnprocessableEntity)(check("GET", "/v1/provider-events?limit=0", smsViewer, ""))
	expect(http.StatusForbidden)(check("POST", intent("sms/sent")+"/retry", smsViewer, ""))
	expect(http.StatusNotFound)(check("POST", intent("refund/in-doubt")+"/cancel", smsOperator, ""))
	expect(http.StatusConflict)(check("POST", intent("sms/sent")+"/cancel", adminToken, `{"reason":"too late"}`))
	expect(http.StatusUnprocessableEntity)(check("POST", intent("sms/sending")+"/resolve", adminToken, `{"as":"skip"}`))
	expect(http.StatusForbidden)(check("PATCH", "/v1/channels/sms/policy", smsOperator, `{"max_attempts": 2}`))
	expect(http.StatusUnprocessableEntity)(check("PATCH", "/v1/channels/sms/policy", adminToken, `{"max_attempts": 0}`))
	expect(http.StatusForbidden)(check("POST", "/v1/channels/sms/pause", smsViewer, ""))
	expect(http.StatusForbidden)(check("POST", "/v1/intents/bulk", smsViewer, `{"action":"retry","reason":"x"}`))
	expect(http.StatusConflict)(check("POST", "/v1/intents/bulk/"+snap.Snapshot+"/apply", smsOperator, ""))
	expect(http.StatusNotFound)(check("POST", "/v1/intents/bulk/00000000-0000-0000-0000-000000000000/apply", adminToken, ""))
	expect(http.StatusBadRequest)(check("POST", "/v1/intents/bulk", adminToken, `{"action":"retry","reason":"x","extra":1}`))
	expect(http.StatusUnprocessableEntity)(check("POST", "/v1/sweeps", adminToken, `{"since":"2026-11-30T12:00:00Z"}`))
	expect(http.StatusForbidden)(check("POST", "/v1/sweeps", smsViewer, `{"channel":"sms","since":"2026-11-30T12:00:00Z"}`))
	expect(http.StatusNotFound)(check("POST", "/v1/sweeps", smsOperator, `{"channel":"refund","since":"2026-11-30T12:00:00Z"}`))

	// Every documented operation answered 2xx at least once.
	for _, op := range spec.Operations() {
		if !slices.ContainsFunc(answered[op], func(s int) bool { return s/100 == 2 }) {
			t.Errorf("%s: no successful answer checked (got %v)", op, answered[op])
		}
	}
}
