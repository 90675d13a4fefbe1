package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestCompareSweeps: the sweep's findings must be exactly what the ledger and
// the table account for; an orphan it misses, a duplicate it invents, and any
// finding but a duplicate after a synchronous failover are violations naming
// the event and reference.
func TestCompareSweeps(t *testing.T) {
	sms := func(ev string, i int, ref string) sandbox.Effect {
		b, _ := json.Marshal(map[string]string{"to": smsNumber(i), "body": "sms-lookup " + ev})
		return sandbox.Effect{Kind: "twilio", Key: ref, Ref: ref, Applied: 1, Body: b}
	}
	refund := func(ev, intent, ref string) sandbox.Effect {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]string{effect.MetaEventID: ev, effect.MetaIntentID: intent}})
		return sandbox.Effect{Kind: "stripe", Key: "refund:" + ev, Ref: ref, Applied: 1, Body: b}
	}
	ledger := sandbox.Snapshot{Effects: []sandbox.Effect{
		sms("evt-1", 1, "SM1"),                           // SENT once: nothing
		sms("evt-2", 2, "SM2a"), sms("evt-2", 2, "SM2b"), // sent twice: a duplicate
		sms("evt-3", 3, "SM3"),       // its intent lost: an orphan
		refund("evt-4", "4", "re_4"), // its intent lost: an orphan
		refund("evt-5", "5", "re_5"),
		refund("evt-6", "60", "re_6"), // created for a lost intent 60, the event enqueued again as 6: an orphan
	}}
	intents := []harnessdb.IntentTally{
		{ID: 1, EventID: "evt-1", Channel: "sms-lookup", Status: "SENT", ProviderRef: "SM1"},
		{ID: 2, EventID: "evt-2", Channel: "sms-lookup", Status: "SENT", ProviderRef: "SM2a"},
		{ID: 5, EventID: "evt-5", Channel: "refund", Status: "SENT", ProviderRef: "re_5"},
		{ID: 6, EventID: "evt-6", Channel: "refund", Status: "FAILED"}, // Stripe refused its key with other metadata
	}
	chans := []Channel{Channels[0], Channels[1], Channels[2]} // hook (not swept), refund, sms-lookup
	finding := func(kind, ev, ref string) effectdtype.Finding {
		return effectdtype.Finding{Kind: kind, EventID: ev, Objects: []effect.Object{{Ref: ref}}}
	}
	right := []effectdtype.SweepReport{
		{Channel: "refund", Findings: []effectdtype.Finding{finding("orphan", "evt-4", "re_4"), finding("orphan", "evt-6", "re_6")}},
		{Channel: "sms-lookup", Findings: []effectdtype.Finding{finding("orphan", "", "SM3"), finding("duplicate", "evt-2", "SM2b")}},
	}
	rows, vs := compareSweeps(right, intents, ledger, chans, false)
	if len(vs) > 0 {
		t.Errorf("matching sweeps: violations %+v", vs)
	}
	if len(rows) != 2 || rows[1].Found["orphan"] != 1 || rows[1].Expected["duplicate"] != 1 || rows[0].Expected["orphan"] != 2 || rows[0].Expected["unsettled"] != 0 {
		t.Errorf("rows = %+v", rows)
	}

	wrong := []effectdtype.SweepReport{
		{Channel: "refund", Findings: []effectdtype.Finding{finding("duplicate", "evt-5", "re_5"), finding("orphan", "evt-6", "re_6")}},
		{Channel: "sms-lookup", Findings: []effectdtype.Finding{finding("duplicate", "evt-2", "SM2b")}},
	}
	_, vs = compareSweeps(wrong, intents, ledger, chans, false)
	got := map[string]string{}
	for _, v := range vs {
		got[v.Channel+" "+v.Rule] = strings.Join(v.Keys, " ")
	}
	want := map[string]string{
		"refund sweep: duplicate finding the checker does not account for": "evt-5",
		"refund sweep: no orphan finding where the checker counts one":     "evt-4/re_4",
		"sms-lookup sweep: no orphan finding where the checker counts one": "evt-3/SM3",
	}
	if len(got) != len(want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}

	_, vs = compareSweeps(right, intents, ledger, chans, true)
	n := 0
	for _, v := range vs {
		if strings.Contains(v.Rule, "after a synchronous failover") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("synchronous: %d channels flagged for their findings, want 2: %+v", n, vs)
	}

	// After a synchronous failover, an SMS the skip policy settled after a
	// call maybe sent is that policy's, not a lost commit's; one SKIPPED
	// with no such call recorded is still flagged.
	skip := []Channel{Channels[4]}
	skipped := func(inDoubt int) []harnessdb.IntentTally {
		return []harnessdb.IntentTally{{ID: 7, EventID: "evt-7", Channel: "sms-skip", Status: "SKIPPED", InDoubtSends: inDoubt}}
	}
	skipBody, _ := json.Marshal(map[string]string{"to": smsNumber(7), "body": "sms-skip evt-7"})
	skipLedger := sandbox.Snapshot{Effects: []sandbox.Effect{{Kind: "twilio", Key: "SM7", Ref: "SM7", Applied: 1, Body: skipBody}}}
	skipSweep := []effectdtype.SweepReport{{Channel: "sms-skip", Findings: []effectdtype.Finding{finding("unsettled", "evt-7", "SM7")}}}
	for _, c := range []struct {
		inDoubt int
		flagged bool
	}{{1, false}, {0, true}} {
		_, vs = compareSweeps(skipSweep, skipped(c.inDoubt), skipLedger, skip, true)
		if flagged := len(vs) > 0; flagged != c.flagged {
			t.Errorf("synchronous, SKIPPED after %d calls in doubt: violations %+v, want flagged %t", c.inDoubt, vs, c.flagged)
		}
	}
}

// listingSweeper is a sweep over a listing of objects created at given
// times. Like the dispatcher's, it lists 5 minutes on either side of its
// window, declines a listing of more than limit objects as the Stripe
// provider does (wrapped in dispatcher.ErrListing), and finds each object
// created in its window (an orphan, named by its reference).
type listingSweeper struct {
	created []time.Time
	limit   int
	calls   int
}

func (l *listingSweeper) Sweep(_ context.Context, channel string, since, until time.Time) (effectdtype.SweepReport, error) {
	l.calls++
	rep := effectdtype.SweepReport{Channel: channel, Provider: "stripe", Since: since, Until: until,
		ListedSince: since.Add(-5 * time.Minute), ListedUntil: until.Add(5 * time.Minute), Counts: map[string]int{}}
	for i, at := range l.created {
		if at.Before(rep.ListedSince) || !at.Before(rep.ListedUntil) {
			continue
		}
		if rep.Objects++; rep.Objects > l.limit {
			return rep, fmt.Errorf("%w: stripe list refunds: more than %d created between %s and %s: list a shorter window", dispatcher.ErrListing,
				l.limit, rep.ListedSince.Format(time.RFC3339), rep.ListedUntil.Format(time.RFC3339))
		}
		if !at.Before(since) && at.Before(until) {
			rep.Findings = append(rep.Findings, effectdtype.Finding{Kind: effectdtype.FindingOrphan, Objects: []effect.Object{{Ref: fmt.Sprint("re_", i)}}})
			rep.Counts[effectdtype.FindingOrphan]++
		}
	}
	return rep, nil
}

// sweepAPI serves the admin API with sweeper behind it, and a client of it.
func sweepAPI(t *testing.T, sweeper api.Sweeper) *client.Client {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never connected: the sweep route needs no row
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h, err := api.NewHandler(api.Config{Pool: pool, InsecureNoAuth: true, Sweeper: sweeper, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &client.Client{BaseURL: srv.URL}
}

// TestSweepSplitsWindowTooLarge: a window whose listing holds more objects
// than the provider lists, which the admin API declines, is swept in halves,
// as an operator would, and the halves' findings cover the whole window,
// each object found once; the checker's judgement of the window then sees
// the union. A declined window too short to halve, and any other failure,
// are errors.
func TestSweepSplitsWindowTooLarge(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	l := &listingSweeper{limit: 150} // a minute's window lists 11 minutes: 110
	for i := range 600 {             // 10 a minute for an hour
		l.created = append(l.created, t0.Add(time.Duration(i)*6*time.Second))
	}
	c := sweepAPI(t, l)
	since, until := t0.Add(-48*time.Hour), t0.Add(48*time.Hour)

	s, err := sweepSplitting(ctx, c, "refund", since, until)
	if err != nil {
		t.Fatalf("sweep of a window holding 600 objects, 150 listed at most: %v", err)
	}
	if s.Declined == 0 || s.Parts < 2 {
		t.Errorf("declined %d, parts %d: want the window split", s.Declined, s.Parts)
	}
	if !s.Report.Since.Equal(since) || !s.Report.Until.Equal(until) || s.Report.Counts[effectdtype.FindingOrphan] != 600 {
		t.Errorf("report over [%s, %s), %d orphans: want the whole window's, 600", s.Report.Since, s.Report.Until, s.Report.Counts[effectdtype.FindingOrphan])
	}
	seen := map[string]int{}
	for _, f := range s.Report.Findings {
		seen[f.Objects[0].Ref]++
	}
	for i := range l.created {
		if ref := fmt.Sprint("re_", i); seen[ref] != 1 {
			t.Errorf("%s found %d times, want once", ref, seen[ref])
		}
	}

	// The checker judges the union: every orphan true, none missed.
	var ledger sandbox.Snapshot // each a refund of an event whose intent was lost
	for i := range l.created {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]string{effect.MetaEventID: fmt.Sprint("lost-", i)}})
		ledger.Effects = append(ledger.Effects, sandbox.Effect{Kind: "stripe", Key: fmt.Sprint("refund:lost-", i), Ref: fmt.Sprint("re_", i), Applied: 1, Body: b})
	}
	a := expectFindings(nil, ledger)
	bad := map[[2]string][]string{}
	a.judge(Channels[1], sweepWindow{"history", since, until, true}, s.Report, bad)
	if len(bad) > 0 {
		t.Errorf("judged the split sweep: %v", bad)
	}

	// Ten objects in one second: every window around them lists more than 5.
	l.limit, l.created = 5, l.created[:0]
	for i := range 10 {
		l.created = append(l.created, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	// Ten more an hour later, a part the listing of which holds five: swept.
	for i := range 5 {
		l.created = append(l.created, t0.Add(time.Hour+time.Duration(i)*time.Second))
	}
	s, err = sweepSplitting(ctx, c, "refund", since, until)
	if err != nil || len(s.Unsplit) == 0 || s.Report.Counts[effectdtype.FindingOrphan] != 5 {
		t.Errorf("parts that cannot be split enough: %v, unsplit %q, %d orphans: want those parts named, the later 5 found",
			err, s.Unsplit, s.Report.Counts[effectdtype.FindingOrphan])
	}
	for _, part := range s.Unsplit { // each a part whose listing reaches the ten
		at, _ := time.Parse(time.RFC3339, part[1:strings.Index(part, ",")])
		if at.Before(t0.Add(-7*time.Minute)) || at.After(t0.Add(5*time.Minute)) || !strings.Contains(part, "list a shorter window") {
			t.Errorf("unsplit part %q: want one within 5 minutes of %s, with the API's message", part, t0)
		}
	}

	l.calls = 0
	down := sweepAPI(t, failingSweeper{})
	if _, err := sweepSplitting(ctx, down, "refund", since, until); err == nil || declinedTooLarge(err) {
		t.Errorf("a provider that does not answer: %v, want its error, not split", err)
	}
}

// failingSweeper is a sweep whose provider does not answer.
type failingSweeper struct{}

func (failingSweeper) Sweep(context.Context, string, time.Time, time.Time) (effectdtype.SweepReport, error) {
	return effectdtype.SweepReport{}, fmt.Errorf("%w: stripe list refunds: unavailable: connection refused", dispatcher.ErrListing)
}
