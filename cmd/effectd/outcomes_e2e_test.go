package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

const (
	e2eTwilioSID   = "AC00000000000000000000000000000000"
	e2eTwilioToken = "e2etoken"
	e2eStripeHook  = "whsec_e2e_stripe_endpoint"
)

// freeAddr returns a loopback address with a port that was free a moment ago:
// the YAML must name the ingress URL before effectd listens on it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// outcomesStack is effectd serve with its ingress, the sandbox, and channels
// sms (Twilio, status callbacks), sms-manual (Twilio, in_doubt: manual),
// refund (Stripe, events) all notifying the webhook channel events.
type outcomesStack struct {
	sb      *sandbox.Server
	pool    *pgxpool.Pool
	ingress string // http://host:port
}

func newOutcomesStack(t *testing.T, dsn string) *outcomesStack {
	t.Helper()
	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	sb.SetTwilioQueueDelay(100 * time.Millisecond)
	sb.SetTwilioDeliveryDelay(100 * time.Millisecond)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	addr := freeAddr(t)
	ing := "http://" + addr
	sb.SetStripeWebhook(ing+"/ingress/stripe/refund", e2eStripeHook)
	notify := "notify: { channel: events, on: [sent, failed, in_doubt, delivered, undelivered] }"
	yaml := fmt.Sprintf(`channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %[1]q, status_callback: %[2]q }
    %[4]s
    policy: { lease: 5s, backoff: { base: 50ms, max: 200ms } }
  sms-manual:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %[1]q, status_callback: %[3]q }
    %[4]s
    policy: { lease: 5s, in_doubt: manual, backoff: { base: 50ms, max: 200ms } }
  refund:
    provider: stripe
    stripe: { base_url: %[1]q, webhook_secret_env: STRIPE_HOOK_SECRET }
    %[4]s
    policy: { lease: 5s, backoff: { base: 50ms, max: 200ms } }
  events:
    provider: webhook
    webhook: { url: %[5]q, secret_env: HOOK_SECRET }
    policy: { lease: 5s, backoff: { base: 50ms, max: 200ms } }
`, srv.URL, ing+"/ingress/twilio/sms", ing+"/ingress/twilio/sms-manual", notify, srv.URL+"/hooks/events")
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "HOOK_SECRET=" + testSecret,
		"STRIPE_HOOK_SECRET=" + e2eStripeHook, "STRIPE_API_KEY=sk_test_e2e",
		"TWILIO_ACCOUNT_SID=" + e2eTwilioSID, "TWILIO_AUTH_TOKEN=" + e2eTwilioToken,
		"EFFECTD_ADMIN_TOKEN=" + adminToken, "EFFECTD_INGRESS_ADDR=" + addr}
	runBinary(t, env, "migrate")
	p := startProc(t, env, "serve", "--addr", "127.0.0.1:0")
	p.waitAdmin(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &outcomesStack{sb: sb, pool: pool, ingress: ing}
}

func (s *outcomesStack) enqueue(t *testing.T, event, channel, payload string) int64 {
	t.Helper()
	var ok bool
	if err := s.pool.QueryRow(context.Background(), `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`,
		event, channel, payload).Scan(&ok); err != nil || !ok {
		t.Fatalf("enqueue %s: %v %v", event, ok, err)
	}
	var id int64
	s.pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id = $1 AND channel = $2`, event, channel).Scan(&id)
	return id
}

type outcome struct{ Status, Ref, Delivery, Detail string }

func (s *outcomesStack) outcome(t *testing.T, id int64) outcome {
	t.Helper()
	var o outcome
	s.pool.QueryRow(context.Background(), `SELECT status, coalesce(provider_ref, ''), coalesce(delivery, ''), coalesce(delivery_detail, '')
		FROM effectd.intents WHERE id = $1`, id).Scan(&o.Status, &o.Ref, &o.Delivery, &o.Detail)
	return o
}

func (s *outcomesStack) waitDelivery(t *testing.T, id int64, delivery string) outcome {
	t.Helper()
	var o outcome
	poll(t, 20*time.Second, fmt.Sprintf("intent %d delivery %s", id, delivery), func() bool {
		o = s.outcome(t, id)
		return o.Delivery == delivery
	})
	return o
}

func (s *outcomesStack) events(t *testing.T) int {
	t.Helper()
	var n int
	s.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.provider_events`).Scan(&n)
	return n
}

// postTwilio sends a status callback for sid to channel, signed with token
// against the URL Twilio would call.
func (s *outcomesStack) postTwilio(t *testing.T, channel string, id int64, sid, status, token string) (int, string) {
	t.Helper()
	target := fmt.Sprintf("%s/ingress/twilio/%s?effectd_intent_id=%d", s.ingress, channel, id)
	form := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {e2eTwilioSID}, "MessageStatus": {status}, "SmsStatus": {status}}
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", sandbox.TwilioSignature(token, target, form))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Outcome string `json:"outcome"`
	}
	json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body.Outcome
}

// TestOutcomesE2E runs effectd serve with its ingress against the sandbox:
// deliveries from Twilio callbacks and Stripe events, forged and replayed
// callbacks, an in-doubt SMS settled by its callback, and the producer told
// each outcome once through its webhook channel.
func TestOutcomesE2E(t *testing.T) {
	t.Parallel()
	s := newOutcomesStack(t, pgtest.URL(t))

	good := s.enqueue(t, "sms-good", "sms", `{"to":"+15551230001","body":"your code is 1"}`)
	bad := s.enqueue(t, "sms-bad", "sms", `{"to":"+15558675310","body":"your code is 2"}`)
	refund := s.enqueue(t, "refund-ok", "refund", `{"type":"refund","payment_intent":"pi_ok","amount":100}`)
	fails := s.enqueue(t, "refund-fails", "refund", `{"type":"refund","payment_intent":"pi_refund_fails","amount":100}`)

	if o := s.waitDelivery(t, good, "delivered"); o.Status != "SENT" || !strings.HasPrefix(o.Ref, "SM") {
		t.Errorf("good SMS: %+v", o)
	}
	if o := s.waitDelivery(t, bad, "undelivered"); o.Detail != "undelivered 30003" {
		t.Errorf("undeliverable SMS: %+v, want detail undelivered 30003", o)
	}
	s.waitDelivery(t, refund, "delivered")
	s.waitDelivery(t, fails, "undelivered")
	var history []string
	rows, _ := s.pool.Query(context.Background(), `SELECT coalesce(delivery, '') || '/' || outcome FROM effectd.provider_events WHERE intent_id = $1 ORDER BY id`, fails)
	for rows.Next() {
		var h string
		rows.Scan(&h)
		history = append(history, h)
	}
	// The first event may settle the intent before the call's own answer is
	// recorded (settled), or follow it (applied); the failure reverses it.
	// Events may arrive out of order (as Stripe's do): on a slow machine the
	// failure can reach the ingress first and settle the intent undelivered,
	// and the creation's event then changes nothing.
	overtaken := false
	switch h := strings.Join(history, " "); h {
	case "delivered/applied undelivered/applied", "delivered/settled undelivered/applied":
	case "delivered/unchanged undelivered/settled":
		overtaken = true
	default:
		t.Errorf("pi_refund_fails events: %v, want delivered then undelivered", history)
	}

	// A forged callback is refused and changes nothing.
	before, goodBefore := s.events(t), s.outcome(t, good)
	if code, _ := s.postTwilio(t, "sms", good, goodBefore.Ref, "undelivered", "forged"); code != http.StatusBadRequest {
		t.Errorf("forged callback: %d, want 400", code)
	}
	if code, _ := s.postTwilio(t, "nope", good, goodBefore.Ref, "undelivered", e2eTwilioToken); code != http.StatusNotFound {
		t.Errorf("unknown channel: %d, want 404", code)
	}
	// A replayed callback and a late, older status change nothing either.
	if code, out := s.postTwilio(t, "sms", good, goodBefore.Ref, "delivered", e2eTwilioToken); code != http.StatusOK || out != "duplicate" {
		t.Errorf("replayed callback: %d %q, want 200 duplicate", code, out)
	}
	if code, out := s.postTwilio(t, "sms", good, goodBefore.Ref, "sending", e2eTwilioToken); code != http.StatusOK || out != "unchanged" {
		t.Errorf("out-of-order callback: %d %q, want 200 unchanged", code, out)
	}
	if after := s.outcome(t, good); after != goodBefore {
		t.Errorf("the good SMS changed: %+v → %+v", goodBefore, after)
	}
	if n := s.events(t); n != before+1 { // only the late "sending" is new
		t.Errorf("provider events %d → %d, want one more", before, n)
	}

	// An in-doubt SMS (the answer to its create is lost; lookup is off) is
	// settled by its own callback.
	s.sb.Faults.Set("twilio", sandbox.Fault{DropRate: 1})
	doubt := s.enqueue(t, "sms-doubt", "sms-manual", `{"to":"+15551230002","body":"your code is 3"}`)
	poll(t, 20*time.Second, "the dropped SMS was created", func() bool { return len(s.sb.TwilioMessages("+15551230002")) == 1 })
	s.sb.Faults.Set("twilio", sandbox.Fault{})
	o := s.waitDelivery(t, doubt, "delivered")
	if msgs := s.sb.TwilioMessages("+15551230002"); o.Status != "SENT" || o.Ref != msgs[0].SID {
		t.Errorf("in-doubt SMS: %+v, want SENT with %s", o, msgs[0].SID)
	}
	var kinds string
	s.pool.QueryRow(context.Background(), `SELECT string_agg(kind || ':' || outcome, ', ' ORDER BY id) FROM effectd.attempts WHERE intent_id = $1`, doubt).Scan(&kinds)
	if !strings.Contains(kinds, "callback:") {
		t.Errorf("in-doubt SMS attempts: %s, want one of kind callback", kinds)
	}

	// The producer hears each outcome once: sent, then the final delivery
	// (and for pi_refund_fails the reversal after it). The in-doubt SMS may be
	// told in_doubt first, when the reconciler saw it before its callback.
	// Notices are deduplicated at enqueue by <idempotency_key>:<outcome>, and
	// the receiver applies each webhook-id once.
	want := map[string][]string{
		"sms-good":     {"effect.delivered", "effect.sent"},
		"sms-bad":      {"effect.sent", "effect.undelivered"},
		"refund-ok":    {"effect.delivered", "effect.sent"},
		"refund-fails": {"effect.delivered", "effect.sent", "effect.undelivered"},
		"sms-doubt":    {"effect.delivered", "effect.sent"},
	}
	if overtaken {
		want["refund-fails"] = []string{"effect.sent", "effect.undelivered"}
	}
	got := map[string][]string{}
	complete := func() bool {
		for ev, types := range want {
			g := sorted(got[ev])
			if ev == "sms-doubt" && len(g) == 3 && g[1] == "effect.in_doubt" {
				g = []string{g[0], g[2]}
			}
			if fmt.Sprint(g) != fmt.Sprint(types) {
				return false
			}
		}
		return true
	}
	poll(t, 20*time.Second, "every notice delivered", func() bool {
		got = map[string][]string{}
		for _, e := range s.sb.Ledger.Snapshot("webhook").Effects {
			var body struct {
				Type   string `json:"type"`
				Intent struct {
					EventID string `json:"event_id"`
				} `json:"intent"`
			}
			json.Unmarshal(e.Body, &body)
			if e.Applied != 1 {
				t.Fatalf("notice %s applied %d times", e.Key, e.Applied)
			}
			got[body.Intent.EventID] = append(got[body.Intent.EventID], body.Type)
		}
		return complete()
	})
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestOutcomeEventDuringPostgresRestart: a Stripe event that arrives while
// PostgreSQL is down is answered 503 and stores nothing; Stripe's retry after
// the restart applies it.
func TestOutcomeEventDuringPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.Cluster(t, "outcomes")
	s := newOutcomesStack(t, pg.URL("postgres"))
	s.sb.SetStripeRefundFailDelay(3 * time.Second)

	id := s.enqueue(t, "refund-fails", "refund", `{"type":"refund","payment_intent":"pi_refund_fails","amount":100}`)
	s.waitDelivery(t, id, "delivered")
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	// The failure is reported while the database is down: refused, retried.
	refused := func() bool {
		for _, cb := range s.sb.Ledger.Snapshot("stripe").Callbacks {
			if cb.Status == "failed" && cb.Answer == http.StatusServiceUnavailable {
				return true
			}
		}
		return false
	}
	poll(t, 20*time.Second, "the failure event answered 503", refused)
	if _, err := localpg.Start(ctx, pg.Dir, localpg.Options{Port: pg.Port, Fast: true}); err != nil {
		t.Fatal(err)
	}
	o := s.waitDelivery(t, id, "undelivered")
	if o.Detail != "failed expired_or_canceled_card" {
		t.Errorf("after the restart: %+v", o)
	}
}
