package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// Provider is what the suite calls: the dispatcher's Provider, restated here
// because providers import no effectd package but this one.
type Provider interface {
	Send(ctx context.Context, key string, payload json.RawMessage, meta map[string]string) (ref string, err error)
}

// Looker is a Provider that can tell whether an in-doubt call took effect.
type Looker interface {
	Lookup(ctx context.Context, key string, payload json.RawMessage, meta map[string]string, created, claimed time.Time) (ref string, found bool, err error)
}

// Poller is a Provider that can tell what became of an effect it accepted.
type Poller interface {
	Poll(ctx context.Context, ref string) (status, delivery, detail string, reversal bool, err error)
}

// Harness describes the provider under test.
type Harness struct {
	// Kind is the provider's kind in the sandbox ledger and faults: "webhook", "stripe" or "twilio".
	Kind string
	// Keyed says that calls repeated with the same key make no second effect.
	Keyed bool
	// New returns a provider talking to the sandbox at baseURL (no trailing slash).
	New func(t *testing.T, baseURL string) Provider
	// Payload returns a valid payload; different i give different effects.
	Payload func(i int) json.RawMessage
	// Sandbox configures the sandbox of every case (webhook secrets, ...).
	Sandbox sandbox.Options
	// PermanentFault makes the emulator answer an error that must not be
	// retried; zero means every call answers 400.
	PermanentFault sandbox.Fault
	// Skip names cases the provider cannot meet, with the reason.
	Skip map[string]string
	// Cases are the provider's own cases, run like the suite's.
	Cases []Case
}

// Case is one named check run on a fresh Env.
type Case struct {
	Name string                     // subtest name, also the key of Harness.Skip
	Run  func(t *testing.T, e *Env) // the check; e is fresh for this case
}

// Env is one case's world: its own sandbox, served over HTTP, and a provider talking to it.
type Env struct {
	Harness  Harness         // the harness under test
	Sandbox  *sandbox.Server // this case's sandbox: set faults, read the ledger
	URL      string          // the sandbox's base URL
	Provider Provider        // Harness.New(t, URL)
}

// callTimeout bounds every call the suite makes, so a stuck provider fails the case instead of the run.
const callTimeout = 10 * time.Second

// newEnv starts a sandbox for one test and a provider talking to it.
func newEnv(t *testing.T, h Harness) *Env {
	t.Helper()
	sb := sandbox.New(h.Sandbox)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	return &Env{Harness: h, Sandbox: sb, URL: srv.URL, Provider: h.New(t, srv.URL)}
}

// Key is the idempotency key of effect i, shaped like effectd's "<channel>:<event_id>".
func (e *Env) Key(i int) string { return fmt.Sprintf("contract:evt_%d", i) }

// Meta is the meta of effect i, as the dispatcher passes it.
func (e *Env) Meta(i int) map[string]string {
	return map[string]string{effect.MetaEventID: fmt.Sprintf("evt_%d", i), effect.MetaIntentID: fmt.Sprint(i)}
}

// Send sends effect i (Key(i), Payload(i), Meta(i)) within the suite's call timeout.
func (e *Env) Send(t *testing.T, i int) (ref string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return e.Provider.Send(ctx, e.Key(i), e.Harness.Payload(i), e.Meta(i))
}

// Fault sets the fault of the harness's kind; a zero Fault clears it.
func (e *Env) Fault(f sandbox.Fault) { e.Sandbox.Faults.Set(e.Harness.Kind, f) }

// Effects returns the effects of the harness's kind in the ledger.
func (e *Env) Effects() []sandbox.Effect { return e.Sandbox.Ledger.Snapshot(e.Harness.Kind).Effects }

// RequireEffects fails t unless the ledger holds exactly n effects, each applied once, and returns them.
func (e *Env) RequireEffects(t *testing.T, n int) []sandbox.Effect {
	t.Helper()
	effects := e.Effects()
	if len(effects) != n {
		t.Fatalf("ledger has %d %s effects, want %d: %+v", len(effects), e.Harness.Kind, n, effects)
	}
	for _, x := range effects {
		if x.Applied != 1 {
			t.Fatalf("effect %s (ref %s) applied %d times, want once", x.Key, x.Ref, x.Applied)
		}
	}
	return effects
}

// Run runs the contract suite, one parallel subtest per case, each on its own
// sandbox: success, repeat, server_error, rate_limited, permanent, dropped,
// hang, lookup_found, lookup_absent, lookup_cannot_tell, poll_delivered,
// poll_unknown, then h.Cases.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Kind == "" || h.New == nil || h.Payload == nil {
		t.Fatal("providertest: Harness needs Kind, New and Payload")
	}
	for _, c := range append(suite(), h.Cases...) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if reason, ok := h.Skip[c.Name]; ok {
				t.Skip(reason)
			}
			c.Run(t, newEnv(t, h))
		})
	}
}

func suite() []Case {
	return []Case{
		{"success", testSuccess},
		{"repeat", testRepeat},
		{"server_error", testServerError},
		{"rate_limited", testRateLimited},
		{"permanent", testPermanent},
		{"dropped", testDropped},
		{"hang", testHang},
		{"lookup_found", testLookupFound},
		{"lookup_absent", testLookupAbsent},
		{"lookup_cannot_tell", testLookupCannotTell},
		{"poll_delivered", testPollDelivered},
		{"poll_unknown", testPollUnknown},
	}
}

// testPollDelivered: polling what Send created reports it accepted, then
// delivered once the sandbox has delivered it, never anything else.
func testPollDelivered(t *testing.T, e *Env) {
	p, ok := e.Provider.(Poller)
	if !ok {
		t.Skip("not a Poller")
	}
	ref, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, delivery, detail, reversal, err := p.Poll(context.Background(), ref)
		if err != nil {
			t.Fatalf("Poll(%s): %v", ref, err)
		}
		if reversal || (delivery != "accepted" && delivery != "delivered") || status == "" || detail == "" {
			t.Fatalf("Poll(%s) = %q, %q, %q, %v; want accepted or delivered", ref, status, delivery, detail, reversal)
		}
		if delivery == "delivered" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Poll(%s) still %q after 10s", ref, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testPollUnknown: polling a reference the provider never made is an error.
func testPollUnknown(t *testing.T, e *Env) {
	p, ok := e.Provider.(Poller)
	if !ok {
		t.Skip("not a Poller")
	}
	ref, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	unknown := ref[:len(ref)-4] + "0000"
	if _, delivery, _, _, err := p.Poll(context.Background(), unknown); err == nil {
		t.Fatalf("Poll(%s) of an unknown reference = %q, want an error", unknown, delivery)
	}
}

func testSuccess(t *testing.T, e *Env) {
	ref, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if ref == "" {
		t.Fatal("Send returned an empty ref")
	}
	e.RequireEffects(t, 1)
}

func testRepeat(t *testing.T, e *Env) {
	if !e.Harness.Keyed {
		t.Skip("not keyed: a repeated key is a new effect")
	}
	first, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("first Send: %v", err)
	}
	again, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("repeated Send: %v", err)
	}
	if again != first {
		t.Errorf("repeated Send returned ref %q, first %q", again, first)
	}
	e.RequireEffects(t, 1)
}

// requireError fails t unless err is classified as want.
func requireError(t *testing.T, err error, want effect.Class) {
	t.Helper()
	if err == nil {
		t.Fatal("Send succeeded, want an error")
	}
	if got := effect.Classify(err); got != want {
		t.Fatalf("error %q classified %+v, want %+v", err, got, want)
	}
}

func testServerError(t *testing.T, e *Env) {
	e.Fault(sandbox.Fault{ErrorRate: 1, ErrorStatus: 500})
	_, err := e.Send(t, 1)
	requireError(t, err, effect.Class{Retryable: true})
	e.RequireEffects(t, 0)

	e.Fault(sandbox.Fault{})
	if _, err := e.Send(t, 1); err != nil {
		t.Fatalf("Send once the fault cleared: %v", err)
	}
	e.RequireEffects(t, 1)
}

func testRateLimited(t *testing.T, e *Env) {
	e.Fault(sandbox.Fault{ErrorRate: 1, ErrorStatus: 429, RetryAfter: 7})
	_, err := e.Send(t, 1)
	requireError(t, err, effect.Class{Retryable: true, RetryAfter: 7 * time.Second})
	e.RequireEffects(t, 0)
}

func testPermanent(t *testing.T, e *Env) {
	f := e.Harness.PermanentFault
	if f == (sandbox.Fault{}) {
		f = sandbox.Fault{ErrorRate: 1, ErrorStatus: 400}
	}
	e.Fault(f)
	_, err := e.Send(t, 1)
	requireError(t, err, effect.Class{})
	e.RequireEffects(t, 0)
}

func testDropped(t *testing.T, e *Env) {
	e.Fault(sandbox.Fault{DropRate: 1})
	_, err := e.Send(t, 1)
	if err == nil {
		t.Fatal("Send succeeded though the answer was dropped")
	}
	c := effect.Classify(err)
	if !c.MaybeSent {
		t.Fatalf("error %q classified %+v, want maybe sent", err, c)
	}
	applied := e.RequireEffects(t, 1)[0]
	e.Fault(sandbox.Fault{})

	if e.Harness.Keyed {
		if !c.Retryable {
			t.Fatalf("error %q of a keyed provider classified %+v, want retryable", err, c)
		}
		ref, err := e.Send(t, 1)
		if err != nil {
			t.Fatalf("Send again with the same key: %v", err)
		}
		if ref != applied.Ref {
			t.Errorf("Send again returned ref %q, want the applied effect's %q", ref, applied.Ref)
		}
		e.RequireEffects(t, 1)
		return
	}
	if l, ok := e.Provider.(Looker); ok {
		ref, found, err := lookup(t, l, e, 1)
		if err != nil || !found || ref != applied.Ref {
			t.Fatalf("Lookup after a drop = (%q, %v, %v), want (%q, true, nil)", ref, found, err, applied.Ref)
		}
	}
}

func testHang(t *testing.T, e *Env) {
	e.Fault(sandbox.Fault{HangRate: 1})
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	_, err := e.Provider.Send(ctx, e.Key(1), e.Harness.Payload(1), e.Meta(1))
	if took := time.Since(start); took > deadline+2*time.Second {
		t.Errorf("Send took %v past a %v deadline", took, deadline)
	}
	if err == nil {
		t.Fatal("Send succeeded though the sandbox never answered")
	}
	if c := effect.Classify(err); !c.Retryable || !c.MaybeSent {
		t.Fatalf("error %q classified %+v, want retryable and maybe sent", err, c)
	}
	e.RequireEffects(t, 0)
}

// looker returns the provider as a Looker, skipping t when it has no Lookup.
func looker(t *testing.T, e *Env) Looker {
	t.Helper()
	l, ok := e.Provider.(Looker)
	if !ok {
		t.Skip("provider has no Lookup")
	}
	return l
}

// lookup looks effect i up as the reconciler would, claimed a minute ago.
func lookup(t *testing.T, l Looker, e *Env, i int) (ref string, found bool, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	claimed := time.Now().Add(-time.Minute)
	return l.Lookup(ctx, e.Key(i), e.Harness.Payload(i), e.Meta(i), claimed.Add(-time.Minute), claimed)
}

func testLookupFound(t *testing.T, e *Env) {
	l := looker(t, e)
	sent, err := e.Send(t, 1)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	ref, found, err := lookup(t, l, e, 1)
	if err != nil || !found || ref != sent {
		t.Fatalf("Lookup = (%q, %v, %v), want (%q, true, nil)", ref, found, err, sent)
	}
	e.RequireEffects(t, 1)
}

func testLookupAbsent(t *testing.T, e *Env) {
	l := looker(t, e)
	if _, err := e.Send(t, 1); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ref, found, err := lookup(t, l, e, 2)
	if err != nil || found {
		t.Fatalf("Lookup of an effect never sent = (%q, %v, %v), want (_, false, nil)", ref, found, err)
	}
	e.RequireEffects(t, 1)
}

func testLookupCannotTell(t *testing.T, e *Env) {
	l := looker(t, e)
	e.Fault(sandbox.Fault{ErrorRate: 1, ErrorStatus: 503})
	ref, found, err := lookup(t, l, e, 1)
	if err == nil {
		t.Fatalf("Lookup while the provider fails = (%q, %v, nil), want an error (cannot tell)", ref, found)
	}
}
