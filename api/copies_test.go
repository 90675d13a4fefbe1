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

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/statemachine"
)

// TestRedactionFollowsCopies: a viewer of sms* may not see what sms redacts,
// in the sms intent or in any copy of it: the notification on sms-notify that
// embeds it, its attempts' errors, its audit entries, its provider events.
func TestRedactionFollowsCopies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const number = "+15557654321"
	fixture.AddChannel(t, e.pool, "sms-notify", "webhook")
	if _, err := e.pool.Exec(ctx, `
UPDATE effectd.channels SET redact = '{to,body}', notify = '{"channel":"sms-notify","on":["in_doubt","failed"]}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	id := e.insertIntent(t, "sms", "otp-1", statemachine.Sending)
	lastError := "twilio 21211: The 'To' number " + number + " is not a valid phone number"
	eventPayload, _ := json.Marshal(map[string]string{"To": number, "e": lastError})
	for k, q := range []string{
		`UPDATE effectd.intents SET payload = jsonb_build_object('to', $2::text, 'body', 'Your code is 424242') WHERE id = $1 AND $3 <> ''`,
		`UPDATE effectd.intents SET status = 'IN_DOUBT', last_error = $3 WHERE id = $1 AND $2::text <> ''`,
	} {
		if k == 1 {
			fixture.AddAttempts(t, e.pool, fixture.Attempt{IntentID: id, Outcome: "maybe_sent", Error: lastError + number})
			fixture.AddProviderEvents(t, e.pool, fixture.ProviderEvent{Provider: "twilio", EventID: "SM1:failed", Channel: "sms",
				IntentID: id, ObjectRef: "SM1", Type: "failed", Status: "failed", Delivery: "undelivered", Detail: "failed 21211",
				Outcome: "applied", Payload: string(eventPayload)})
		}
		if _, err := e.pool.Exec(ctx, q, id, number, lastError); err != nil {
			t.Fatal(err)
		}
	}
	// An operator's change, audited.
	code, body := e.do(t, http.MethodPost, fmt.Sprintf("/v1/intents/%d/resolve", id), adminToken, `{"as":"skip","reason":"customer asked"}`)
	want(t, code, body, http.StatusOK)

	const viewerToken = "sms-support-0123456789"
	h, err := NewHandler(Config{Pool: e.pool, Tokens: []Token{NewToken(Principal{Name: "sms-support", Role: RoleViewer, Channels: []string{"sms*"}}, viewerToken)},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	viewer := env{pool: e.pool, h: h}
	var notification int64
	if err := e.pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE channel = 'sms-notify' AND event_id LIKE '%:in_doubt'`).Scan(&notification); err != nil {
		t.Fatalf("the in_doubt notification: %v", err)
	}
	// The copy keeps the error's words for everyone, the number for no one.
	code, body = e.do(t, http.MethodGet, fmt.Sprintf("/v1/intents/%d", notification), adminToken, "")
	want(t, code, body, http.StatusOK, "is not a valid phone number")

	for _, path := range []string{
		"/v1/intents",
		"/v1/intents?channel=sms-notify",
		fmt.Sprintf("/v1/intents/%d", id),
		fmt.Sprintf("/v1/intents/%d", notification),
		"/v1/provider-events",
		fmt.Sprintf("/v1/provider-events?intent_id=%d", id),
	} {
		code, body := viewer.do(t, http.MethodGet, path, viewerToken, "")
		want(t, code, body, http.StatusOK)
		if !strings.Contains(body, "sms") {
			t.Errorf("%s: the viewer sees nothing of sms: %s", path, body)
		}
		for _, secret := range []string{number, "424242"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: a viewer of sms* reads %s, which sms redacts: %s", path, secret, body)
			}
		}
	}
}
