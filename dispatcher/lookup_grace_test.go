package dispatcher_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/policy"
)

// lateMaker is a provider without keys that makes the object of a request
// makeAfter past the call's deadline: it still acts on a request the caller
// stopped waiting for, as a provider with a latency spike does. Its first
// call answers maybe-sent answerAfter past the deadline (at the deadline when
// 0: the caller gives up then); a second call is the duplicate the test looks
// for. Lookup finds the object once it is made.
type lateMaker struct {
	makeAfter, answerAfter time.Duration

	mu    sync.Mutex
	sends int
	made  time.Time // when the first call's object exists
}

func (p *lateMaker) Send(ctx context.Context, key string, _ json.RawMessage, _ map[string]string) (string, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return "", providerErr{retryable: false}
	}
	p.mu.Lock()
	p.sends++
	n := p.sends
	if n == 1 {
		p.made = deadline.Add(p.makeAfter)
	}
	p.mu.Unlock()
	if n > 1 {
		return "SM-second", nil
	}
	if p.answerAfter == 0 {
		<-ctx.Done()
	} else { // a caller stuck past its deadline: the lease runs out first
		<-time.After(time.Until(deadline.Add(p.answerAfter)))
	}
	return "", providerErr{retryable: true, maybeSent: true}
}

func (p *lateMaker) Lookup(ctx context.Context, key string, _ json.RawMessage, _ map[string]string, created, claimed time.Time) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.made.IsZero() && !time.Now().Before(p.made) {
		return "SM-first", true, nil
	}
	return "", false, nil
}

func (p *lateMaker) Sends() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends
}

// TestLookupWaitsForTheProvidersGrace: a provider still makes an SMS 2.5 s
// after the call's deadline. With an 8 s lease and a 4 s lookup_grace, the
// call's deadline is 4 s into the lease and the reconciler looks up no sooner
// than the grace after the call could last have reached the provider: it
// finds the SMS and settles the intent SENT with one call, whether the call
// answered maybe-sent at its deadline or its caller stalled past the lease. A
// lookup at the call's end (or at the lease's end with the call's deadline at
// 0.9 of it) finds nothing, calls "absent" proof, and sends the SMS again.
// The margins are seconds: a loaded machine's reconciler can take one to
// reach a row.
func TestLookupWaitsForTheProvidersGrace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		answerAfter time.Duration
		call        string // the call's attempt as recorded
	}{
		{"maybe-sent at the deadline", 0, "send:maybe_sent"},
		{"caller stalled past the lease", 4500 * time.Millisecond, "send:lease expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := &lateMaker{makeAfter: 2500 * time.Millisecond, answerAfter: c.answerAfter}
			pol := fastPolicy("twilio")
			pol.Lease, pol.LookupGrace = policy.Duration(8*time.Second), policy.Duration(4*time.Second)
			pol.InDoubt, pol.LookupFallback = policy.InDoubtLookup, policy.InDoubtManual
			r := start(t, "twilio", p, pol)
			r.enqueue(t, "e")
			var got row
			eventually(t, 30*time.Second, "e → SENT", func() bool { got = r.row(t, "e"); return got.Status == "SENT" })
			if !slices.Contains(got.Outcomes, c.call) {
				t.Errorf("attempts %v; want the call recorded as %q", got.Outcomes, c.call)
			}
			if got.Ref != "SM-first" || p.Sends() != 1 {
				t.Fatalf("SENT with %q after %d calls; want the first call's SMS found, one call (attempts %v)", got.Ref, p.Sends(), got.Outcomes)
			}
		})
	}
}

// TestLookupGraceValidated: lookup_grace must leave the call some of the lease.
func TestLookupGraceValidated(t *testing.T) {
	p := policy.Default("twilio")
	p.Lease, p.LookupGrace = policy.Duration(2*time.Second), policy.Duration(1600*time.Millisecond)
	if err := p.Validate(); err == nil || err.Error() != "policy.lookup_grace: must leave at least 500ms of the lease (2s) for the call, got 1.6s" {
		t.Fatalf("Validate = %v", err)
	}
	p.LookupGrace = -policy.Duration(time.Second)
	if err := p.Validate(); err == nil || err.Error() != "policy.lookup_grace: must not be negative" {
		t.Fatalf("Validate = %v", err)
	}
	p.LookupGrace = 0
	if err := p.Validate(); err != nil || p.GraceAfterCall() != 200*time.Millisecond {
		t.Fatalf("unset: %v, grace %v; want a tenth of the lease", err, p.GraceAfterCall())
	}
}
