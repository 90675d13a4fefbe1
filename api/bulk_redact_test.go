package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// TestBulkSampleRedactedAsList: a snapshot's sample shows each intent as the
// intents list shows it to the same principal: the channel's redacted fields
// masked in the payload and in last_error. The route lets only roles that
// may unmask freeze a snapshot today, so the endpoint is called as a viewer
// directly: the sample must not be the one copy that escapes the redaction.
func TestBulkSampleRedactedAsList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const number, code = "+15557654321", "Your code is 424242"
	if _, err := e.pool.Exec(ctx, `UPDATE effectd.channels SET redact = '{to,body}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	for _, event := range []string{"otp-1", "otp-2"} {
		id := e.insertIntent(t, "sms", event, statemachine.Failed)
		if _, err := e.pool.Exec(ctx, `UPDATE effectd.intents SET payload = jsonb_build_object('to', $2::text, 'body', $3::text),
			last_error = 'twilio 21211: ' || $2 || ' is not a valid phone number' WHERE id = $1`, id, number, code); err != nil {
			t.Fatal(err)
		}
	}

	status, body := e.do(t, http.MethodGet, "/v1/intents?channel=sms", readToken, "")
	want(t, status, body, http.StatusOK)
	var list effectdtype.IntentPage
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	listed := map[int64]effectdtype.IntentRow{}
	for _, r := range list.Intents {
		listed[r.ID] = r
	}

	h := &handler{svc: operator.New(e.pool, nil), log: slog.New(slog.DiscardHandler)}
	req := httptest.NewRequest(http.MethodPost, "/v1/intents/bulk",
		strings.NewReader(`{"action":"retry","filter":{"channel":"sms","event_id_prefix":"otp-"},"reason":"carrier outage over"}`))
	req = req.WithContext(WithPrincipal(req.Context(), Principal{Name: "read", Role: RoleViewer}))
	snap, err := h.createBulk(httptest.NewRecorder(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Sample) != 2 {
		t.Fatalf("sample of %d intents, want 2", len(snap.Sample))
	}
	for _, s := range snap.Sample {
		l, ok := listed[s.ID]
		if !ok {
			t.Fatalf("sampled intent %d is not in the list", s.ID)
		}
		if compact(t, s.Payload) != compact(t, l.Payload) || *s.LastError != *l.LastError {
			t.Errorf("intent %d: sampled %s %q, listed %s %q", s.ID, s.Payload, *s.LastError, l.Payload, *l.LastError)
		}
		for _, secret := range []string{number, "424242"} {
			if strings.Contains(string(s.Payload)+*s.LastError, secret) {
				t.Errorf("intent %d: the sample shows %s, which sms redacts: %s %q", s.ID, secret, s.Payload, *s.LastError)
			}
		}
	}
}
