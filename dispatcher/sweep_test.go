package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/twilio"
	"github.com/effectd/effectd/providers/webhook"
)

var (
	_ dispatcher.Lister = (*stripe.Provider)(nil)
	_ dispatcher.Lister = (*twilio.Provider)(nil)
)

// sweepRig runs a dispatcher with a stripe channel "pay", a twilio channel
// "text" and a webhook channel "hook" against one sandbox, and holds the
// providers so that a test can plant effects behind the dispatcher's back.
type sweepRig struct {
	pool   *pgxpool.Pool
	sb     *sandbox.Server
	stripe *stripe.Provider
	twilio *twilio.Provider
	d      *dispatcher.Dispatcher
	reg    *prometheus.Registry
}

const sweepFrom = "+15005550006"

func newSweepRig(t *testing.T) *sweepRig {
	t.Helper()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_effectd", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tw, err := twilio.New(twilio.Config{AccountSID: "AC" + strings.Repeat("1", 32), AuthToken: "token", From: sweepFrom, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.New(webhook.Config{URL: srv.URL + "/hooks/sweep", Secret: "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"})
	if err != nil {
		t.Fatal(err)
	}
	r := &sweepRig{pool: pgtest.New(t), sb: sb, stripe: st, twilio: tw, reg: prometheus.NewRegistry()}
	r.d = run(t, r.pool, dispatcher.Config{Registerer: r.reg, Channels: []dispatcher.Channel{
		{Name: "pay", Kind: "stripe", Provider: st, Policy: fastPolicy("stripe")},
		{Name: "text", Kind: "twilio", Provider: tw, Policy: fastPolicy("twilio")},
		{Name: "hook", Kind: "webhook", Provider: wh, Policy: fastPolicy("webhook")},
	}})
	return r
}

// send enqueues an intent and waits until the dispatcher has sent it.
func (r *sweepRig) send(t *testing.T, channel, event, payload string) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`, event, channel, payload); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, event+" SENT", func() bool {
		var s string
		r.pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE channel = $1 AND event_id = $2`, channel, event).Scan(&s)
		return s == "SENT"
	})
}

// plant writes an intent in status with reference ref ("" none) straight into
// the table, as a failover or a lost completion leaves it, and returns its id.
func (r *sweepRig) plant(t *testing.T, channel, event, payload, status, ref string, more ...fixture.IntentOption) int64 {
	t.Helper()
	opts := []fixture.IntentOption{fixture.Channel(channel), fixture.Event(event), fixture.Payload(payload),
		fixture.Status(status), fixture.Attempts(1), fixture.ProviderRef(ref), fixture.ClaimedAt(time.Now())}
	opts = append(opts, more...)
	if status == "SENDING" {
		opts = append(opts, fixture.Lease(time.Now().Add(time.Hour)))
	}
	return fixture.Intent(t, r.pool, opts...).ID
}

// refund makes a refund at the sandbox stamped as intent id's, with its own key.
func (r *sweepRig) refund(t *testing.T, key, event string, id int64) string {
	t.Helper()
	ref, err := r.stripe.Send(context.Background(), key, json.RawMessage(`{"type":"refund","payment_intent":"pi_sweep","amount":300}`),
		map[string]string{effect.MetaEventID: event, effect.MetaIntentID: strconv.FormatInt(id, 10)})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// sms sends an SMS at the sandbox, as an attempt whose answer was lost would.
func (r *sweepRig) sms(t *testing.T, payload string) string {
	t.Helper()
	ref, err := r.twilio.Send(context.Background(), "", json.RawMessage(payload), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (r *sweepRig) sweep(t *testing.T, channel string) effectdtype.SweepReport {
	t.Helper()
	now := time.Now()
	rep, err := r.d.Sweep(context.Background(), channel, now.Add(-time.Hour), now.Add(time.Second))
	if err != nil {
		t.Fatalf("sweep %s: %v", channel, err)
	}
	return rep
}

// findings returns the report's findings as "kind intent_id refs…" lines, sorted.
func findings(rep effectdtype.SweepReport) []string {
	var out []string
	for _, f := range rep.Findings {
		var refs []string
		for _, o := range f.Objects {
			refs = append(refs, o.Ref)
		}
		slices.Sort(refs)
		out = append(out, fmt.Sprintf("%s %d %s", f.Kind, f.IntentID, strings.Join(refs, ",")))
	}
	slices.Sort(out)
	return out
}

// tableState is every intent's id, status and reference, to show a sweep changed nothing.
func (r *sweepRig) tableState(t *testing.T) string {
	t.Helper()
	var s string
	if err := r.pool.QueryRow(context.Background(),
		`SELECT string_agg(id || ' ' || status || ' ' || coalesce(provider_ref, '-') || ' ' || attempts, '; ' ORDER BY id) FROM effectd.intents`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSweepFindsEveryPlantedDiscrepancy: on a clean run the sweep finds
// nothing; then, for Stripe and for Twilio, an orphan object, a duplicate
// object for one intent, a FAILED intent whose effect the provider silently
// holds (and, for Stripe, an IN_DOUBT one, and a FAILED one created before
// the window whose refund is in it), and a SENT intent whose effect the
// provider lacks are each found, with the operation that settles them, and
// nothing else: not a SENDING intent under a live lease whose object exists,
// nor objects of another channel. The sweep changes nothing.
func TestSweepFindsEveryPlantedDiscrepancy(t *testing.T) {
	r := newSweepRig(t)
	ctx := context.Background()
	r.send(t, "pay", "clean-1", `{"type":"refund","payment_intent":"pi_1","amount":100}`)
	r.send(t, "pay", "clean-2", `{"type":"transfer","amount":700,"currency":"usd","destination":"acct_1"}`)
	r.send(t, "pay", "clean-3", `{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_1"}`)
	r.send(t, "text", "clean-1", `{"to":"+15551230001","body":"your code is 1"}`)
	r.send(t, "text", "clean-2", `{"to":"+15551230002","body":"your code is 2"}`)
	for _, ch := range []string{"pay", "text"} {
		rep := r.sweep(t, ch)
		if len(rep.Findings) != 0 || rep.Intents != 3 && ch == "pay" || rep.Intents != 2 && ch == "text" {
			t.Fatalf("clean %s: %d intents, %d objects, findings %v", ch, rep.Intents, rep.Objects, findings(rep))
		}
	}

	// Stripe.
	refund := `{"type":"refund","payment_intent":"pi_sweep","amount":300}`
	failed := r.plant(t, "pay", "failed", refund, "FAILED", "")
	failedRef := r.refund(t, "pay:failed", "failed", failed)
	doubt := r.plant(t, "pay", "doubt", refund, "IN_DOUBT", "")
	doubtRef := r.refund(t, "pay:doubt", "doubt", doubt)
	dup := r.plant(t, "pay", "dup", refund, "SENT", "")
	dupRef1 := r.refund(t, "pay:dup", "dup", dup)
	dupRef2 := r.refund(t, "pay:dup:again", "dup", dup)
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET provider_ref = $2 WHERE id = $1`, dup, dupRef1); err != nil {
		t.Fatal(err)
	}
	missing := r.plant(t, "pay", "missing", refund, "SENT", "re_gone")
	orphanRef := r.refund(t, "ghost-key", "ghost", 987654321)
	flying := r.plant(t, "pay", "flying", refund, "SENDING", "")
	r.refund(t, "pay:flying", "flying", flying) // its completion is still coming
	// An intent created before the window, retried into it: its refund is in
	// the window, and it is found by the intent id stamped on it.
	old := r.plant(t, "pay", "old", refund, "FAILED", "")
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET created_at = now() - interval '2 hours' WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	oldRef := r.refund(t, "pay:old", "old", old)
	other := r.plant(t, "text", "other-channel", `{"to":"+15551230009","body":"x"}`, "FAILED", "")
	r.refund(t, "other", "other-channel", other) // another channel's: its sweep reports it

	// Twilio.
	tFailedSMS := `{"to":"+15551230003","body":"your parcel left"}`
	tFailed := r.plant(t, "text", "t-failed", tFailedSMS, "FAILED", "")
	tFailedRef := r.sms(t, tFailedSMS)
	tDupSMS := `{"to":"+15551230004","body":"your parcel arrived"}`
	tDup1 := r.sms(t, tDupSMS)
	tDup := r.plant(t, "text", "t-dup", tDupSMS, "SENT", tDup1)
	tDup2 := r.sms(t, tDupSMS)
	tMissing := r.plant(t, "text", "t-missing", `{"to":"+15551230005","body":"never left"}`, "SENT", "SM"+strings.Repeat("0", 32))
	tOrphan := r.sms(t, `{"to":"+15551230006","body":"nobody asked"}`)

	before := r.tableState(t)
	pay := r.sweep(t, "pay")
	text := r.sweep(t, "text")
	sorted := func(s ...string) string { slices.Sort(s); return strings.Join(s, ",") }
	for _, c := range []struct {
		rep  effectdtype.SweepReport
		want []string
	}{
		{pay, []string{
			fmt.Sprintf("duplicate %d %s", dup, sorted(dupRef1, dupRef2)),
			fmt.Sprintf("missing %d ", missing),
			fmt.Sprintf("orphan 0 %s", orphanRef),
			fmt.Sprintf("unsettled %d %s", doubt, doubtRef),
			fmt.Sprintf("unsettled %d %s", failed, failedRef),
			fmt.Sprintf("unsettled %d %s", old, oldRef),
		}},
		{text, []string{
			fmt.Sprintf("duplicate %d %s", tDup, sorted(tDup1, tDup2)),
			fmt.Sprintf("missing %d ", tMissing),
			fmt.Sprintf("orphan 0 %s", tOrphan),
			fmt.Sprintf("unsettled %d %s", tFailed, tFailedRef),
		}},
	} {
		want := c.want
		slices.Sort(want)
		if got := findings(c.rep); !slices.Equal(got, want) {
			t.Errorf("%s: findings\n  %s\nwant\n  %s", c.rep.Channel, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if after := r.tableState(t); after != before {
		t.Errorf("the sweep changed the table:\nbefore %s\nafter  %s", before, after)
	}
	for _, f := range pay.Findings {
		want := map[string]string{
			effectdtype.FindingUnsettled: "",
			effectdtype.FindingDuplicate: "keep " + dupRef1 + " and reverse " + dupRef2,
			effectdtype.FindingMissing:   "holds neither re_gone",
			effectdtype.FindingOrphan:    "no intent",
		}[f.Kind]
		switch {
		case f.Kind == effectdtype.FindingUnsettled && f.IntentID == doubt:
			want = fmt.Sprintf("effectd intents resolve %d --as sent --ref %s", doubt, doubtRef)
		case f.Kind == effectdtype.FindingUnsettled && (f.IntentID == failed || f.IntentID == old):
			want = fmt.Sprintf("effectd intents retry %d", f.IntentID)
		}
		if !strings.Contains(f.Operation, want) {
			t.Errorf("%s finding of intent %d: operation %q, want it to say %q", f.Kind, f.IntentID, f.Operation, want)
		}
	}
	for ch, rep := range map[string]effectdtype.SweepReport{"pay": pay, "text": text} {
		for _, k := range effectdtype.FindingKinds {
			if got := dispatcher.SweepFindings(r.d, ch, k); got != float64(rep.Counts[k]) {
				t.Errorf("effectd_sweep_findings_total{channel=%q,kind=%q} = %v, want %d", ch, k, got, rep.Counts[k])
			}
		}
	}
}

// TestSweepRefuses: a webhook channel, an unknown channel, and a window that
// is empty, reversed or too long are refused naming the field.
func TestSweepRefuses(t *testing.T) {
	r := newSweepRig(t)
	now := time.Now()
	for _, c := range []struct {
		channel      string
		since, until time.Time
		want         error
		field        string
	}{
		{"hook", now.Add(-time.Hour), now, dispatcher.ErrInvalid, "channel: \"hook\" is a webhook channel"},
		{"", now.Add(-time.Hour), now, dispatcher.ErrInvalid, "channel: is required"},
		{"nowhere", now.Add(-time.Hour), now, dispatcher.ErrNotFound, "nowhere"},
		{"pay", time.Time{}, now, dispatcher.ErrInvalid, "since: is required"},
		{"pay", now, now.Add(-time.Hour), dispatcher.ErrInvalid, "since: "},
		{"pay", now, now, dispatcher.ErrInvalid, "is not before until"},
		{"pay", now.Add(-dispatcher.SweepMaxWindow - time.Second), now, dispatcher.ErrInvalid, "until: the window is 168h0m1s long"},
	} {
		_, err := r.d.Sweep(context.Background(), c.channel, c.since, c.until)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Sweep(%q, %v, %v) = %v; want %v naming %q", c.channel, c.since, c.until, err, c.want, c.field)
		}
	}
}
