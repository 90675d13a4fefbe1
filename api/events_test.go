package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
)

// TestProviderEvents lists stored provider events: orphans only on request,
// never a channel outside the token's scope, bad parameters 422.
func TestProviderEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e1 := fixture.Intent(t, e.pool, fixture.Channel("sms"), fixture.Event("e1"), fixture.Status("SENT"), fixture.Attempts(0))
	fixture.AddProviderEvents(t, e.pool,
		fixture.ProviderEvent{Provider: "twilio", EventID: "SM1:delivered", Channel: "sms", IntentID: e1.ID, ObjectRef: "SM1",
			Type: "delivered", Status: "delivered", Delivery: "delivered", Detail: "delivered", Outcome: "applied"},
		fixture.ProviderEvent{Provider: "twilio", EventID: "SM9:sent", Channel: "sms", ObjectRef: "SM9",
			Type: "sent", Status: "sent", Delivery: "accepted", Detail: "sent", Outcome: "orphan"},
		fixture.ProviderEvent{Provider: "stripe", EventID: "evt_1", Channel: "refund", ObjectRef: "re_9",
			Type: "refund.created", Status: "succeeded", Delivery: "delivered", Detail: "succeeded", Outcome: "orphan"})
	list := func(h http.Handler, token, query string) (int, []effectdtype.ProviderEvent) {
		t.Helper()
		code, body := env{pool: e.pool, h: h}.do(t, http.MethodGet, "/v1/provider-events"+query, token, "")
		var page effectdtype.ProviderEventPage
		json.Unmarshal([]byte(body), &page)
		if code != http.StatusOK {
			t.Logf("%s: %s", query, body)
		}
		return code, page.Events
	}
	ids := func(evs []effectdtype.ProviderEvent) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.EventID)
		}
		return out
	}
	if code, evs := list(e.h, adminToken, ""); code != 200 || len(evs) != 3 {
		t.Fatalf("all: %d %v", code, ids(evs))
	}
	if _, evs := list(e.h, adminToken, "?orphan=true"); len(evs) != 2 || evs[0].IntentID != nil {
		t.Fatalf("orphans: %v", ids(evs))
	}
	if _, evs := list(e.h, readToken, "?intent_id=1"); len(evs) != 1 || evs[0].EventID != "SM1:delivered" {
		t.Fatalf("by intent: %v", ids(evs))
	}
	if _, evs := list(e.h, adminToken, "?orphan=true&channel=refund&limit=1"); len(evs) != 1 || evs[0].EventID != "evt_1" {
		t.Fatalf("orphans of refund: %v", ids(evs))
	}
	for _, bad := range []string{"?orphan=maybe", "?intent_id=x", "?limit=0"} {
		if code, _ := list(e.h, adminToken, bad); code != http.StatusUnprocessableEntity && code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 4xx", bad, code)
		}
	}
	if code, _ := list(e.h, "", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}

	// A token scoped to sms never sees refund's events.
	const smsToken = "sms-secret-0123456789"
	h, err := NewHandler(Config{Pool: e.pool, Tokens: []Token{NewToken(Principal{Name: "sms-oncall", Role: RoleViewer, Channels: []string{"sms"}}, smsToken)},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, evs := list(h, smsToken, "?orphan=true"); len(evs) != 1 || evs[0].Channel != "sms" {
		t.Fatalf("scoped orphans: %v", ids(evs))
	}
	if _, evs := list(h, smsToken, "?channel=refund"); len(evs) != 0 {
		t.Fatalf("scoped token sees refund: %v", ids(evs))
	}

	// A channel that redacts fields: viewers see every value of its events'
	// payloads masked (a Twilio callback names the number To, not to), the
	// payload still an object with its keys, as the schema says; operators and
	// admins see it as stored.
	if _, err := e.pool.Exec(ctx, `UPDATE effectd.channels SET redact = '{to,body}' WHERE name = 'sms';
UPDATE effectd.provider_events SET payload = '{"To":"+15558675309","MessageStatus":"delivered","Price":-0.0075,"Flags":[true,null,"x"]}' WHERE channel = 'sms'`); err != nil {
		t.Fatal(err)
	}
	const stored = `{"To":"+15558675309","Flags":[true,null,"x"],"Price":-0.0075,"MessageStatus":"delivered"}`
	const masked = `{"Flags":[true,null,"***"],"MessageStatus":"***","Price":"***","To":"***"}`
	for _, tc := range []struct {
		h     http.Handler
		token string
		want  string
	}{{h, smsToken, masked}, {e.h, readToken, masked}, {e.h, adminToken, stored}} {
		_, evs := list(tc.h, tc.token, "?channel=sms")
		for _, ev := range evs {
			if got := compact(t, ev.Payload); got != compact(t, []byte(tc.want)) {
				t.Errorf("token %s: event %s payload %s, want %s", tc.token, ev.EventID, got, tc.want)
			}
		}
		if len(evs) != 2 {
			t.Errorf("token %s: %d sms events, want 2", tc.token, len(evs))
		}
	}
}
