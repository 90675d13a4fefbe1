package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/twilio"
)

// Compile-time checks that the providers fit the dispatcher's interfaces.
var (
	_ dispatcher.Provider = (*stripe.Provider)(nil)
	_ dispatcher.Looker   = (*stripe.Provider)(nil)
	_ dispatcher.Keyed    = (*stripe.Provider)(nil)
	_ dispatcher.Provider = (*twilio.Provider)(nil)
	_ dispatcher.Looker   = (*twilio.Provider)(nil)
)

const smsTo = "+15005550006"

// paymentRig runs a dispatcher with a stripe channel "refund" and a twilio
// channel "sms" against one sandbox.
type paymentRig struct {
	pool   *pgxpool.Pool
	sb     *sandbox.Server
	stripe *stripe.Provider
	d      *dispatcher.Dispatcher
}

func newPaymentRig(t *testing.T, preStart func(r *paymentRig)) *paymentRig {
	t.Helper()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_effectd", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tw, err := twilio.New(twilio.Config{AccountSID: "AC" + strings.Repeat("0", 32), AuthToken: "token", From: "+15005550006", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	refund, sms := fastPolicy("stripe"), fastPolicy("twilio")
	refund.InDoubt, refund.LookupFallback = policy.InDoubtLookup, policy.InDoubtManual
	sms.InDoubt, sms.LookupFallback = policy.InDoubtLookup, policy.InDoubtManual
	chans := []dispatcher.Channel{
		{Name: "refund", Kind: "stripe", Provider: st, Policy: refund},
		{Name: "sms", Kind: "twilio", Provider: tw, Policy: sms},
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	r := &paymentRig{pool: pool, sb: sb, stripe: st}
	if preStart != nil {
		preStart(r)
	}
	r.d = run(t, pool, dispatcher.Config{Channels: chans, ReconcileInterval: 50 * time.Millisecond})
	return r
}

// enqueueSQL enqueues as a producer in any language would.
func (r *paymentRig) enqueueSQL(t *testing.T, event, channel, payload string) int64 {
	t.Helper()
	var ok bool
	if err := r.pool.QueryRow(context.Background(), `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`, event, channel, payload).Scan(&ok); err != nil || !ok {
		t.Fatalf("enqueue %s: %v %v", event, ok, err)
	}
	var id int64
	r.pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id = $1 AND channel = $2`, event, channel).Scan(&id)
	return id
}

func (r *paymentRig) final(t *testing.T, id int64, want string) (ref string, outcomes []string) {
	t.Helper()
	ctx := context.Background()
	var status string
	eventually(t, 15*time.Second, "intent "+strconv.FormatInt(id, 10)+" → "+want, func() bool {
		r.pool.QueryRow(ctx, `SELECT status, coalesce(provider_ref, '') FROM effectd.intents WHERE id = $1`, id).Scan(&status, &ref)
		return status == want
	})
	rows, _ := r.pool.Query(ctx, `SELECT kind || ':' || outcome FROM effectd.attempts WHERE intent_id = $1 ORDER BY id`, id)
	for rows.Next() {
		var s string
		rows.Scan(&s)
		outcomes = append(outcomes, s)
	}
	return ref, outcomes
}

func stripeEffects(sb *sandbox.Server) []sandbox.Effect { return sb.Ledger.Snapshot("stripe").Effects }

// keyCalls counts the calls of kind that carried key: those that applied an
// effect, and those that did not (a replay of the key's first answer, a
// repeated webhook delivery, a call dropped before it applied anything).
// Effects alone cannot show a repeated call: the sandbox applies a key once.
func keyCalls(sb *sandbox.Server, kind, key string) (applied, notApplied int) {
	for _, c := range sb.Ledger.Snapshot(kind).Calls {
		switch {
		case c.Key != key:
		case c.Applied:
			applied++
		default:
			notApplied++
		}
	}
	return applied, notApplied
}

// TestRefundAndSMSThroughSQL: a refund and an SMS enqueued through SQL end SENT
// with the providers' references.
func TestRefundAndSMSThroughSQL(t *testing.T) {
	t.Parallel()
	r := newPaymentRig(t, nil)
	refund := r.enqueueSQL(t, "evt-refund-1", "refund", `{"type":"refund","payment_intent":"pi_123","amount":500}`)
	sms := r.enqueueSQL(t, "evt-sms-1", "sms", `{"to":"`+smsTo+`","body":"Your code is 123456"}`)
	ref, _ := r.final(t, refund, "SENT")
	if !strings.HasPrefix(ref, "re_") {
		t.Errorf("refund ref = %q, want re_…", ref)
	}
	sid, _ := r.final(t, sms, "SENT")
	if !strings.HasPrefix(sid, "SM") {
		t.Errorf("sms ref = %q, want SM…", sid)
	}
	effects := stripeEffects(r.sb)
	if len(effects) != 1 || effects[0].Ref != ref || effects[0].Key != "refund:evt-refund-1" {
		t.Fatalf("stripe effects = %+v", effects)
	}
	if a, n := keyCalls(r.sb, "stripe", "refund:evt-refund-1"); a != 1 || n != 0 {
		t.Errorf("refund calls: %d applied, %d not; want one call", a, n)
	}
	var body struct {
		Metadata map[string]string `json:"metadata"`
	}
	json.Unmarshal(effects[0].Body, &body)
	if body.Metadata[effect.MetaEventID] != "evt-refund-1" || body.Metadata[effect.MetaIntentID] != strconv.FormatInt(refund, 10) {
		t.Errorf("refund metadata = %v", body.Metadata)
	}
	if msgs := r.sb.TwilioMessages(smsTo); len(msgs) != 1 || msgs[0].SID != sid {
		t.Fatalf("messages = %+v", msgs)
	}
}

// TestDroppedAnswersSettleOnce: the sandbox applies the effect and drops the
// answer. The refund is settled by replaying its key (one refund); the SMS,
// which has no key, by listing messages (one message).
func TestDroppedAnswersSettleOnce(t *testing.T) {
	t.Parallel()
	r := newPaymentRig(t, nil)
	r.sb.Faults.Set("stripe", sandbox.Fault{DropRate: 1, Times: 1})
	refund := r.enqueueSQL(t, "evt-refund-2", "refund", `{"type":"refund","payment_intent":"pi_456","amount":700}`)
	ref, outcomes := r.final(t, refund, "SENT")
	if effects := stripeEffects(r.sb); len(effects) != 1 || effects[0].Applied != 1 || effects[0].Ref != ref {
		t.Fatalf("stripe effects = %+v, ref %s", effects, ref)
	}
	if len(outcomes) != 2 || outcomes[0] != "send:retry" || outcomes[1] != "send:sent" {
		t.Errorf("refund attempts = %v; want a maybe-sent retry, then the replayed success", outcomes)
	}
	if a, n := keyCalls(r.sb, "stripe", "refund:evt-refund-2"); a != 1 || n != 1 {
		t.Errorf("refund calls: %d applied, %d not; want the dropped one applied and one replay", a, n)
	}

	r.sb.Faults.Set("twilio", sandbox.Fault{DropRate: 1, Times: 1})
	sms := r.enqueueSQL(t, "evt-sms-2", "sms", `{"to":"`+smsTo+`","body":"Your code is 654321"}`)
	sid, outcomes := r.final(t, sms, "SENT")
	msgs := r.sb.TwilioMessages(smsTo)
	if len(msgs) != 1 || msgs[0].SID != sid {
		t.Fatalf("messages = %+v, ref %s", msgs, sid)
	}
	if len(outcomes) != 2 || outcomes[0] != "send:maybe_sent" || !strings.HasPrefix(outcomes[1], "lookup:found") {
		t.Errorf("sms attempts = %v; want maybe_sent, then a lookup that found it", outcomes)
	}
}

// TestCrashedRefundSettlesByKeyReplay: a worker applied a refund and died
// before recording it (the row is SENDING with its lease expired). The
// reconciler repeats the call with the same key; Stripe replays the first
// refund, and the row ends SENT with that refund's id.
func TestCrashedRefundSettlesByKeyReplay(t *testing.T) {
	t.Parallel()
	var id int64
	var applied string
	r := newPaymentRig(t, func(r *paymentRig) {
		ctx := context.Background()
		payload := `{"type":"refund","payment_intent":"pi_789","amount":900}`
		id = r.enqueueSQL(t, "evt-refund-3", "refund", payload)
		r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENDING', attempts = 1, claimed_at = now() - interval '1 minute',
			lease_expires_at = now() - interval '1 second' WHERE id = $1`, id)
		var err error
		applied, err = r.stripe.Send(ctx, "refund:evt-refund-3", json.RawMessage(payload),
			map[string]string{effect.MetaEventID: "evt-refund-3", effect.MetaIntentID: strconv.FormatInt(id, 10)})
		if err != nil {
			t.Fatal(err)
		}
	})
	ref, outcomes := r.final(t, id, "SENT")
	if ref != applied {
		t.Fatalf("settled with %s, the crashed call created %s", ref, applied)
	}
	if effects := stripeEffects(r.sb); len(effects) != 1 || effects[0].Applied != 1 {
		t.Fatalf("stripe effects = %+v", effects)
	}
	if a, n := keyCalls(r.sb, "stripe", "refund:evt-refund-3"); a != 1 || n != 1 {
		t.Errorf("refund calls: %d applied, %d not; want the crashed call and one replay", a, n)
	}
	if len(outcomes) != 2 || outcomes[0] != "send:lease expired" || !strings.HasPrefix(outcomes[1], "lookup:found") {
		t.Errorf("attempts = %v", outcomes)
	}
}

// TestErrorClassesEndToEnd: each class of provider error, through the real
// Stripe and Twilio providers against the sandbox, leaves the row in the
// state the class calls for, with the attempt rows to show it.
func TestErrorClassesEndToEnd(t *testing.T) {
	t.Parallel()
	const refundPayload = `{"type":"refund","payment_intent":"pi_e","amount":300}`
	cases := []struct {
		name, channel, payload string
		fault                  *sandbox.Fault
		kind                   string
		before                 func(t *testing.T, r *paymentRig, id int64) // runs after enqueue, before dispatch
		status                 string
		outcomes               string
		errContains            string
	}{
		{name: "stripe 503 is retried", channel: "refund", payload: refundPayload, kind: "stripe",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 503, Times: 1}, status: "SENT", outcomes: "[send:retry send:sent]"},
		{name: "stripe 429 is retried", channel: "refund", payload: refundPayload, kind: "stripe",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 429, RetryAfter: 1, Times: 1}, status: "SENT", outcomes: "[send:retry send:sent]"},
		{name: "stripe 402 card declined is permanent", channel: "refund", payload: refundPayload, kind: "stripe",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 402, Times: 1}, status: "FAILED", outcomes: "[send:failed]", errContains: "402"},
		{name: "stripe 401 is permanent", channel: "refund", payload: refundPayload, kind: "stripe",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 401, Times: 1}, status: "FAILED", outcomes: "[send:failed]", errContains: "401"},
		{name: "stripe idempotency_error is permanent", channel: "refund", payload: refundPayload, kind: "stripe",
			before: func(t *testing.T, r *paymentRig, id int64) {
				// Someone used our key with other parameters first.
				_, err := r.stripe.Send(context.Background(), "refund:evt", json.RawMessage(`{"type":"refund","payment_intent":"pi_e","amount":999}`),
					map[string]string{effect.MetaEventID: "evt", effect.MetaIntentID: strconv.FormatInt(id, 10)})
				if err != nil {
					t.Fatal(err)
				}
			},
			status: "FAILED", outcomes: "[send:failed]", errContains: "IDEMPOTENCY KEY REUSED"},
		{name: "twilio invalid number 21211 is permanent", channel: "sms", payload: `{"to":"+15005550001","body":"x"}`,
			status: "FAILED", outcomes: "[send:failed]", errContains: "21211"},
		{name: "twilio unsubscribed 21610 is permanent", channel: "sms", payload: `{"to":"+15005550004","body":"x"}`,
			status: "FAILED", outcomes: "[send:failed]", errContains: "21610"},
		{name: "twilio 429 is retried", channel: "sms", payload: `{"to":"` + smsTo + `","body":"x"}`, kind: "twilio",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 429, RetryAfter: 1, Times: 1}, status: "SENT", outcomes: "[send:retry send:sent]"},
		{name: "twilio 500 is retried", channel: "sms", payload: `{"to":"` + smsTo + `","body":"x"}`, kind: "twilio",
			fault: &sandbox.Fault{ErrorRate: 1, ErrorStatus: 500, Times: 1}, status: "SENT", outcomes: "[send:retry send:sent]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var id int64
			r := newPaymentRig(t, func(r *paymentRig) {
				if c.fault != nil {
					r.sb.Faults.Set(c.kind, *c.fault)
				}
				id = r.enqueueSQL(t, "evt", c.channel, c.payload)
				if c.before != nil {
					c.before(t, r, id)
				}
			})
			_, outcomes := r.final(t, id, c.status)
			if fmt.Sprint(outcomes) != c.outcomes {
				t.Errorf("attempts = %v, want %s", outcomes, c.outcomes)
			}
			var lastErr string
			r.pool.QueryRow(context.Background(), `SELECT coalesce(last_error, '') FROM effectd.intents WHERE id = $1`, id).Scan(&lastErr)
			if !strings.Contains(lastErr, c.errContains) {
				t.Errorf("last_error = %q, want it to contain %q", lastErr, c.errContains)
			}
		})
	}
}
