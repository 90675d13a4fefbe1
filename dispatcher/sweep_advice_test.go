package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
)

// sweepWindow sweeps channel over [since, until) and fails the test on an error.
func (r *sweepRig) sweepWindow(t *testing.T, channel string, since, until time.Time) effectdtype.SweepReport {
	t.Helper()
	rep, err := r.d.Sweep(context.Background(), channel, since, until)
	if err != nil {
		t.Fatalf("sweep %s: %v", channel, err)
	}
	return rep
}

// age moves intent id's creation and claim back by d, as if it had been
// created and claimed that long ago.
func (r *sweepRig) age(t *testing.T, id int64, d time.Duration) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(),
		`UPDATE effectd.intents SET created_at = created_at - $2::interval, claimed_at = claimed_at - $2::interval WHERE id = $1`, id, d.String()); err != nil {
		t.Fatal(err)
	}
}

// TestSweepNeverAdvisesARepeat: a SENT intent created and claimed three hours
// ago whose effect the provider made only now (a lookup that replayed the
// call inside the key window; for Twilio, a message sent late) lies outside
// the listing of a window around its creation. The sweep finds it by the
// intent's reference and identity and reports nothing, where it once
// reported it missing with the advice to enqueue it again (a second
// refund). A SENT payment intent whose absence only Stripe's eventually
// consistent search could prove is uncertain, and advises no repeat; a
// refund proven absent whatever its time is still missing.
func TestSweepNeverAdvisesARepeat(t *testing.T) {
	r := newSweepRig(t)
	ctx := context.Background()
	refund := `{"type":"refund","payment_intent":"pi_late","amount":300}`
	replayed := r.plant(t, "pay", "replayed", refund, "SENDING", "")
	r.age(t, replayed, 3*time.Hour)
	ref := r.refund(t, "pay:replayed", "replayed", replayed) // the replay, now
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENT', provider_ref = $2, lease_expires_at = NULL WHERE id = $1`, replayed, ref); err != nil {
		t.Fatal(err)
	}
	uncertain := r.plant(t, "pay", "searched", `{"type":"payment_intent","amount":1200,"currency":"usd"}`, "SENT", "pi_gone")
	r.age(t, uncertain, 3*time.Hour)
	gone := r.plant(t, "pay", "gone", `{"type":"refund","payment_intent":"pi_late","amount":300}`, "SENT", "re_gone")
	r.age(t, gone, 3*time.Hour)

	sms := `{"to":"+15551239001","body":"your parcel is late"}`
	late := r.plant(t, "text", "late", sms, "SENDING", "")
	r.age(t, late, 3*time.Hour)
	sid := r.sms(t, sms)
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENT', provider_ref = $2, lease_expires_at = NULL WHERE id = $1`, late, sid); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	pay := r.sweepWindow(t, "pay", now.Add(-4*time.Hour), now.Add(-2*time.Hour))
	text := r.sweepWindow(t, "text", now.Add(-4*time.Hour), now.Add(-2*time.Hour))
	if got, want := strings.Join(findings(pay), "; "), strings.Join([]string{
		fmt.Sprintf("missing %d ", gone), fmt.Sprintf("uncertain %d ", uncertain)}, "; "); got != want {
		t.Errorf("pay: findings %q, want %q", got, want)
	}
	if got := findings(text); len(got) != 0 {
		t.Errorf("text: findings %q, want none: the late message is the intent's", got)
	}
	for _, f := range pay.Findings {
		if f.IntentID != gone && strings.Contains(f.Operation, "enqueue it again") {
			t.Errorf("%s finding of intent %d advises a repeat the provider may already hold: %s", f.Kind, f.IntentID, f.Operation)
		}
	}
	if n := pay.Counts[effectdtype.FindingUncertain]; n != 1 {
		t.Errorf("pay: counts[uncertain] = %d, want 1", n)
	}
}

// TestSweepConsidersOldUnsettledIntents: an SMS whose intent was created two
// hours ago, before the window, and sits IN_DOUBT without a reference, is
// reported as that intent's unsettled effect with the resolve that settles
// it, not as an orphan to reverse; one whose old intent is still SENDING
// under a live lease is its call in flight, no finding at all. A message no
// intent could own is still an orphan.
func TestSweepConsidersOldUnsettledIntents(t *testing.T) {
	r := newSweepRig(t)
	doubtSMS := `{"to":"+15551239101","body":"your refund is on its way"}`
	doubt := r.plant(t, "text", "old-doubt", doubtSMS, "IN_DOUBT", "")
	r.age(t, doubt, 2*time.Hour)
	doubtRef := r.sms(t, doubtSMS)
	flyingSMS := `{"to":"+15551239102","body":"your table is ready"}`
	flying := r.plant(t, "text", "old-flying", flyingSMS, "SENDING", "")
	r.age(t, flying, 2*time.Hour)
	r.sms(t, flyingSMS)
	orphan := r.sms(t, `{"to":"+15551239103","body":"nobody asked"}`)

	now := time.Now()
	rep := r.sweepWindow(t, "text", now.Add(-time.Hour), now.Add(time.Second))
	want := []string{fmt.Sprintf("orphan 0 %s", orphan), fmt.Sprintf("unsettled %d %s", doubt, doubtRef)}
	if got := findings(rep); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("findings %q, want %q", got, want)
	}
	for _, f := range rep.Findings {
		if f.IntentID == doubt && !strings.Contains(f.Operation, fmt.Sprintf("effectd intents resolve %d --as sent --ref %s", doubt, doubtRef)) {
			t.Errorf("unsettled finding of intent %d: operation %q, want the resolve as sent", doubt, f.Operation)
		}
	}
}

// TestSweepOldSkippedOrRetriedOwnsItsObject: an SMS whose intent was created
// before the window and SKIPPED after a call that may have sent it, or made
// PENDING again for another call, is that intent's (unsettled, with advice
// that repeats nothing), never an orphan to reverse.
func TestSweepOldSkippedOrRetriedOwnsItsObject(t *testing.T) {
	r := newSweepRig(t)
	skippedSMS := `{"to":"+15551239201","body":"your code is 1234"}`
	skipped := r.plant(t, "text", "old-skipped", skippedSMS, "SKIPPED", "")
	r.age(t, skipped, 2*time.Hour)
	skippedRef := r.sms(t, skippedSMS)
	retriedSMS := `{"to":"+15551239202","body":"your code is 5678"}`
	// due in an hour from its insert on: the running dispatcher must not call it
	retried := r.plant(t, "text", "old-retried", retriedSMS, "PENDING", "", fixture.NextAttemptAt(time.Now().Add(time.Hour)))
	r.age(t, retried, 2*time.Hour)
	retriedRef := r.sms(t, retriedSMS)

	now := time.Now()
	rep := r.sweepWindow(t, "text", now.Add(-time.Hour), now.Add(time.Second))
	want := []string{fmt.Sprintf("unsettled %d %s", skipped, skippedRef), fmt.Sprintf("unsettled %d %s", retried, retriedRef)}
	slices.Sort(want)
	if got := findings(rep); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("findings %q, want %q", got, want)
	}
	for _, f := range rep.Findings {
		if strings.Contains(f.Operation, "under a new event id") || strings.Contains(f.Operation, "reverse") || strings.Contains(f.Operation, "effectd intents retry") {
			t.Errorf("finding of intent %d advises a repeat or a reversal: %q", f.IntentID, f.Operation)
		}
		if f.IntentID == retried && !strings.Contains(f.Operation, fmt.Sprintf("effectd intents cancel %d", retried)) {
			t.Errorf("finding of the PENDING intent %d: %q, want the cancel that keeps its next call from applying it again", retried, f.Operation)
		}
	}
}

// TestSweepListsNotPastALateClaim: a refund intent created three hours ago
// and claimed again only now (an operator's resend) left IN_DOUBT, with its
// refund made now. The sweep of a window around its creation once listed
// the provider up to the late claim — hours of other refunds, a listing
// refused as too large at any window size. It now lists the window (and
// claims up to sweepLateListing past it) and looks the late intent up one by
// one: the refund is still found and reported as the intent's unsettled
// effect, with the resolve that settles it.
func TestSweepListsNotPastALateClaim(t *testing.T) {
	r := newSweepRig(t)
	ctx := context.Background()
	id := r.plant(t, "pay", "resent-late", `{"type":"refund","payment_intent":"pi_sweep","amount":300}`, "IN_DOUBT", "")
	r.age(t, id, 3*time.Hour)
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET claimed_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	ref := r.refund(t, "pay:resent-late", "resent-late", id)

	now := time.Now()
	until := now.Add(-2 * time.Hour)
	rep := r.sweepWindow(t, "pay", now.Add(-4*time.Hour), until)
	if limit := until.Add(20 * time.Minute); rep.ListedUntil.After(limit) {
		t.Errorf("listed until %s, past the window's end %s by %s: a late claim widened the listing",
			rep.ListedUntil.Format(time.RFC3339), until.Format(time.RFC3339), rep.ListedUntil.Sub(until).Round(time.Second))
	}
	want := fmt.Sprintf("unsettled %d %s", id, ref)
	if got := findings(rep); !slices.Contains(got, want) {
		t.Fatalf("findings %q, want %q", got, want)
	}
	for _, f := range rep.Findings {
		if f.IntentID == id && !strings.Contains(f.Operation, fmt.Sprintf("effectd intents resolve %d --as sent --ref %s", id, ref)) {
			t.Errorf("unsettled finding of intent %d: operation %q, want the resolve as sent", id, f.Operation)
		}
	}
}
