package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/statemachine"
)

// TestKeyWindowMatchesStripeLookup: the dispatcher stops trusting Stripe's
// keys exactly when the Stripe lookup stops replaying and starts listing.
func TestKeyWindowMatchesStripeLookup(t *testing.T) {
	if got := dispatcher.KeyWindow("stripe"); got != stripe.ReplayWindow || got <= 0 || got >= 24*time.Hour {
		t.Fatalf("KeyWindow(stripe) = %s, stripe.ReplayWindow = %s; want them equal and under Stripe's 24 h", got, stripe.ReplayWindow)
	}
	for _, kind := range []string{"webhook", "twilio"} {
		if w := dispatcher.KeyWindow(kind); w != 0 {
			t.Errorf("KeyWindow(%s) = %s, want 0", kind, w)
		}
	}
}

// windowed is a keyed provider that declares a key window.
type windowed struct{ window time.Duration }

func (windowed) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	return "", nil
}
func (windowed) Idempotent() bool           { return true }
func (w windowed) KeyWindow() time.Duration { return w.window }

var _ dispatcher.KeyWindowed = (*stripe.Provider)(nil)

// TestKeyWindowDeclaredByProvider: the Stripe provider declares the window
// the dispatcher keeps for its kind, and New refuses a provider whose
// declared window differs from its kind's.
func TestKeyWindowDeclaredByProvider(t *testing.T) {
	p, err := stripe.New(stripe.Config{APIKey: "sk_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.KeyWindow(); got != dispatcher.KeyWindow("stripe") {
		t.Fatalf("stripe provider declares %s, the dispatcher keeps %s", got, dispatcher.KeyWindow("stripe"))
	}
	for _, tc := range []struct {
		kind   string
		window time.Duration
		ok     bool
	}{{"stripe", stripe.ReplayWindow, true}, {"stripe", time.Hour, false}, {"twilio", time.Hour, false}} {
		_, err := dispatcher.New(nil, dispatcher.Config{Channels: []dispatcher.Channel{
			{Name: "c", Kind: tc.kind, Provider: windowed{tc.window}, Policy: policy.Default(tc.kind)}}})
		if refused := errors.Is(err, dispatcher.ErrInvalid); refused == tc.ok {
			t.Errorf("%s provider declaring %s: New error %v", tc.kind, tc.window, err)
		}
	}
}

// seedAged inserts an intent of channel (provider kind) in state s, created
// age ago (attempts 0 when PENDING, else 1), with an expired lease when
// SENDING, and with one send attempt when called.
func seedAged(t *testing.T, pool *pgxpool.Pool, channel, kind, event string, s statemachine.State, age time.Duration, called bool) int64 {
	t.Helper()
	fixture.AddChannel(t, pool, channel, kind, fixture.IfAbsent())
	then := time.Now().Add(-age.Truncate(time.Second))
	opts := []fixture.IntentOption{fixture.Event(event), fixture.Channel(channel), fixture.Status(string(s)),
		fixture.Payload(`{"type":"refund","payment_intent":"pi_1","amount":100}`), fixture.CreatedAt(then), fixture.ClaimedAt(then)}
	if s == statemachine.Sending {
		opts = append(opts, fixture.Lease(time.Now().Add(-time.Minute)))
	}
	id := fixture.Intent(t, pool, opts...).ID
	if called {
		fixture.AddAttempts(t, pool, fixture.Attempt{IntentID: id, Outcome: "retry"})
	}
	return id
}

// TestKeyWindowOperator: an operator's retry or resend of a Stripe intent that
// may have been applied is refused once Stripe has forgotten its key, unless
// forced with a reason, which the audit keeps. Other states, other providers
// and younger intents are not concerned.
func TestKeyWindowOperator(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	const old, young = 25 * time.Hour, 22 * time.Hour
	cases := []struct {
		name     string
		channel  string
		kind     string
		from     statemachine.State
		age      time.Duration
		called   bool
		op       operator.Operation
		want     statemachine.State // "" when refused
		refusal  error
		windowed bool // refused by the key window
	}{
		{"retry in doubt, past the window", "refund", "stripe", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.Requeue}, "", statemachine.ErrTransition, true},
		{"resend in doubt, past the window", "refund", "stripe", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.ResolveSend}, "", statemachine.ErrTransition, true},
		{"resend stuck sending, past the window", "refund", "stripe", statemachine.Sending, old, false,
			operator.Operation{Event: statemachine.ResolveSend}, "", statemachine.ErrTransition, true},
		{"retry skipped after a call, past the window", "refund", "stripe", statemachine.Skipped, old, true,
			operator.Operation{Event: statemachine.Requeue}, "", statemachine.ErrTransition, true},
		{"force without a reason", "refund", "stripe", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.Requeue, Force: true}, "", dispatcher.ErrInvalid, false},
		{"force with a reason", "refund", "stripe", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.Requeue, Force: true, Reason: "Stripe dashboard shows no refund for pi_1"}, statemachine.Pending, nil, false},
		{"retry in doubt, within the window", "refund", "stripe", statemachine.InDoubt, young, true,
			operator.Operation{Event: statemachine.Requeue}, statemachine.Pending, nil, false},
		{"retry skipped before any call", "refund", "stripe", statemachine.Skipped, old, false,
			operator.Operation{Event: statemachine.Requeue}, statemachine.Pending, nil, false},
		{"retry failed", "refund", "stripe", statemachine.Failed, old, true,
			operator.Operation{Event: statemachine.Requeue}, statemachine.Pending, nil, false},
		{"resolve sent, past the window", "refund", "stripe", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.ResolveSent, ProviderRef: "re_1"}, statemachine.Sent, nil, false},
		{"webhook in doubt, past a day", "hook", "webhook", statemachine.InDoubt, old, true,
			operator.Operation{Event: statemachine.Requeue}, statemachine.Pending, nil, false},
	}
	for i, c := range cases {
		id := seedAged(t, pool, c.channel, c.kind, fmt.Sprintf("e%d", i), c.from, c.age, c.called)
		op := c.op
		op.IntentID, op.Actor = id, "oncall"
		_, after, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, op)
		var kw *dispatcher.KeyWindowError
		if c.want == "" {
			if !errors.Is(err, c.refusal) || errors.As(err, &kw) != c.windowed {
				t.Errorf("%s: err = %v; want %v (key window: %v)", c.name, err, c.refusal, c.windowed)
			}
			if c.windowed && (kw.Window != 23*time.Hour || !strings.Contains(err.Error(), "force")) {
				t.Errorf("%s: %v", c.name, err)
			}
			var status string
			var audits int
			pool.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM effectd.audit WHERE intent_id = $1) FROM effectd.intents WHERE id = $1`, id).Scan(&status, &audits)
			if status != string(c.from) || audits != 0 {
				t.Errorf("%s: refused, yet the row is %s with %d audit entries", c.name, status, audits)
			}
			continue
		}
		if err != nil || after.Status != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, after.Status, err, c.want)
		}
	}
	// The forced retry is audited with its reason and the force.
	var forced string
	if err := pool.QueryRow(ctx, `SELECT after::text FROM effectd.audit WHERE after->>'force' = 'true'`).Scan(&forced); err != nil {
		t.Fatalf("no audit entry records the force: %v", err)
	}
	if !strings.Contains(forced, "Stripe dashboard shows no refund") {
		t.Errorf("forced audit entry = %s", forced)
	}
}

// keyedLooking is a provider with keys and a lookup, as Stripe is.
type keyedLooking struct{ looking }

func (keyedLooking) Idempotent() bool { return true }

// TestKeyWindowReconciler: the reconciler never sends again a Stripe call
// that may have been applied once Stripe has forgotten its key, unless a
// lookup proved it absent; within the window, or for other providers, the
// policy applies as before.
func TestKeyWindowReconciler(t *testing.T) {
	t.Parallel()
	absent := func(string) (string, bool, error) { return "", false, nil }
	cannotTell := func(string) (string, bool, error) { return "", false, errors.New("2 matches") }
	cases := []struct {
		name      string
		kind      string
		inDoubt   string
		fallback  string
		lookup    func(string) (string, bool, error) // nil: a provider without lookup
		age       time.Duration
		want      string
		calls     int
		lastError string
	}{
		{"resend policy past the window", "stripe", "resend", "manual", nil, 25 * time.Hour, "IN_DOUBT", 0, "idempotency-key window"},
		{"resend policy within the window", "stripe", "resend", "manual", nil, time.Hour, "SENT", 1, ""},
		{"keyed without lookup past the window", "stripe", "lookup", "manual", nil, 25 * time.Hour, "IN_DOUBT", 0, "idempotency-key window"},
		{"lookup cannot tell, fallback resend, past the window", "stripe", "lookup", "resend", cannotTell, 25 * time.Hour, "IN_DOUBT", 0, "2 matches; past the provider's idempotency-key window"},
		{"lookup proves absent past the window", "stripe", "lookup", "manual", absent, 25 * time.Hour, "SENT", 1, ""},
		{"webhook resend past a day", "webhook", "resend", "manual", nil, 25 * time.Hour, "SENT", 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "re_again", nil }}
			var p dispatcher.Provider = keyedProvider{s}
			if c.lookup != nil {
				p = keyedLooking{looking{s, c.lookup}}
			}
			pol := fastPolicy(c.kind)
			pol.InDoubt, pol.LookupFallback = c.inDoubt, c.fallback
			r := start(t, c.kind, p, pol)
			seedAged(t, r.pool, "c", c.kind, "e", statemachine.Sending, c.age, false)
			got := r.waitStatus(t, "e", c.want)
			if s.Calls("c:e") != c.calls || !strings.Contains(got.LastError, c.lastError) {
				t.Errorf("%+v after %d calls; want %d calls, last_error containing %q", got, s.Calls("c:e"), c.calls, c.lastError)
			}
		})
	}
}

// TestKeyWindowMaybeSentCall: a keyed call that may have been applied is
// repeated with its key only while the provider remembers the key; past the
// window it goes to the reconciler, here to IN_DOUBT (policy resend).
func TestKeyWindowMaybeSentCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		age   time.Duration
		want  string
		calls int
	}{
		{time.Hour, "SENT", 2},
		{25 * time.Hour, "IN_DOUBT", 1},
	} {
		t.Run(c.age.String(), func(t *testing.T) {
			t.Parallel()
			s := maybeSentOnce()
			pol := fastPolicy("stripe")
			pol.InDoubt = policy.InDoubtResend
			r := start(t, "stripe", keyedProvider{s}, pol)
			seedAged(t, r.pool, "c", "stripe", "e", statemachine.Pending, c.age, false)
			got := r.waitStatus(t, "e", c.want)
			if s.Calls("c:e") != c.calls {
				t.Errorf("%+v after %d calls, want %d", got, s.Calls("c:e"), c.calls)
			}
		})
	}
}
