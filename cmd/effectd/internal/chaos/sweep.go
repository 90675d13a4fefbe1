package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// After a failover run has drained, the harness runs the reconciliation sweep
// of every Stripe and Twilio channel over the run's window, through the admin
// API of one instance as an operator would (POST /v1/sweeps), and compares
// its findings with what the checker counts from the sandbox ledger and the
// table: the sweep is how an operator sees a failover's damage, so it must
// see all of it and nothing else.

// SweepRow is one channel's sweep: findings by kind, as the sweep reported
// them and as the checker expects them.
type SweepRow struct {
	Channel         Channel
	Intents         int // intents the sweep read from its window
	Objects         int // provider objects it listed
	Found, Expected map[string]int
}

// sweptChannel reports whether the sweep covers c: a provider that lists
// what it holds (webhooks cannot).
func sweptChannel(c Channel) bool { return c.Provider == "stripe" || c.Provider == "twilio" }

// sweep runs the sweep of every swept channel over [since, now) through
// instance 1's admin API, a window it declines as too large in halves
// (sweepSplitting). A failed sweep is a violation, not a failed run.
func (h *harness) sweep(ctx context.Context, since time.Time) (reps []effectdtype.SweepReport, failed []Violation) {
	addr, _ := h.instances[0].addr.Load().(string)
	c := &client.Client{BaseURL: addr}
	until := time.Now()
	for _, ch := range h.cfg.Channels {
		if !sweptChannel(ch) {
			continue
		}
		s, err := sweepSplitting(ctx, c, ch.Name, since, until)
		if err != nil {
			failed = append(failed, Violation{Rule: "sweep failed: " + err.Error(), Channel: ch.Name, Keys: []string{"-"}})
			continue
		}
		if len(s.Unsplit) > 0 {
			failed = append(failed, Violation{Rule: s.unsplitRule(), Channel: ch.Name, Keys: s.Unsplit})
			continue
		}
		rep := s.Report
		h.note("sweep %s: %d intents, %d objects: orphan %d, duplicate %d, unsettled %d, missing %d", ch.Name, rep.Intents, rep.Objects,
			rep.Counts[effectdtype.FindingOrphan], rep.Counts[effectdtype.FindingDuplicate],
			rep.Counts[effectdtype.FindingUnsettled], rep.Counts[effectdtype.FindingMissing])
		reps = append(reps, rep)
	}
	return reps, failed
}

// minSplitWindow is the shortest window the checker halves when the admin API
// declines a sweep as too large. The sweep lists the provider 5 minutes on
// either side of its window (the dispatcher's skew), so below a minute a half
// lists nearly what its parent did: halving further cannot bring the listing
// under the provider's bound.
const minSplitWindow = time.Minute

// shorterWindow is what the admin API's message says when it declines a
// sweep's window as too large (POST /v1/sweeps, api/sweeps.go): 503
// unavailable when the provider's listing holds more than it reads
// (stripe.ListLimit, twilio.ListLimit: "list a shorter window"), 422 invalid
// when the window holds more intents than dispatcher.SweepMaxIntents ("sweep a
// shorter one") or its unmatched objects more unsettled owners than the sweep
// considers ("sweep a shorter window").
var shorterWindow = regexp.MustCompile(`(list|sweep) a shorter (window|one)`)

// declinedTooLarge reports whether err is the admin API declining a sweep's
// window as too large.
func declinedTooLarge(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Status == http.StatusServiceUnavailable || e.Status == http.StatusUnprocessableEntity) &&
		shorterWindow.MatchString(e.Message)
}

// splitSweep is one channel's sweep of a window, as an operator runs it when
// the API declines the window as too large: halved until each part answers.
type splitSweep struct {
	Report   effectdtype.SweepReport // the union of the parts' reports, over the whole window
	Parts    int                     // sweeps that answered
	Declined int                     // sweeps declined as too large, each then split in halves
	// Unsplit names each part declined as too large that is too short to
	// halve: [since, until) and the API's message. The report lacks them.
	Unsplit []string
}

// sweepSplitting sweeps channel over [since, until) through c. A window the
// API declines as too large is split into halves, each swept the same way,
// down to minSplitWindow; the report is the union of the parts': their
// findings, counts, intents, unlisted intents and objects (the parts'
// listings overlap by the skew, so an object near a cut counts twice), over
// the whole window. A declined part too short to halve is named in Unsplit,
// and the other parts are still swept; any other failure ends the sweep and
// is returned as it came.
func sweepSplitting(ctx context.Context, c *client.Client, channel string, since, until time.Time) (splitSweep, error) {
	s := splitSweep{Report: effectdtype.SweepReport{Channel: channel, Since: since.UTC(), Until: until.UTC(), Counts: map[string]int{}}}
	return s, s.sweep(ctx, c, since, until)
}

// sweep adds the sweep of [since, until), or of its halves, to s.
func (s *splitSweep) sweep(ctx context.Context, c *client.Client, since, until time.Time) error {
	rep, err := c.Sweep(ctx, s.Report.Channel, since, until)
	if declinedTooLarge(err) {
		s.Declined++
		if until.Sub(since) < 2*minSplitWindow {
			s.Unsplit = append(s.Unsplit, fmt.Sprintf("[%s, %s) (%s): %v", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339),
				until.Sub(since).Round(time.Second), err))
			return nil
		}
		mid := since.Add(until.Sub(since) / 2)
		if err := s.sweep(ctx, c, since, mid); err != nil {
			return err
		}
		return s.sweep(ctx, c, mid, until)
	}
	if err != nil {
		return err
	}
	s.add(rep)
	return nil
}

// add merges one part's report into the whole window's.
func (s *splitSweep) add(rep effectdtype.SweepReport) {
	u := &s.Report
	if s.Parts == 0 || rep.ListedSince.Before(u.ListedSince) {
		u.ListedSince = rep.ListedSince
	}
	if rep.ListedUntil.After(u.ListedUntil) {
		u.ListedUntil = rep.ListedUntil
	}
	s.Parts++
	u.Provider = rep.Provider
	u.Intents += rep.Intents
	u.Objects += rep.Objects
	u.Unlisted += rep.Unlisted
	u.Findings = append(u.Findings, rep.Findings...)
	for k, n := range rep.Counts {
		u.Counts[k] += n
	}
}

// unsplitRule is the violation of a sweep with parts declined as too large
// that are too short to halve.
func (s splitSweep) unsplitRule() string {
	return fmt.Sprintf("sweep: %d parts of the window declined as too large, not split below %s (their findings unknown)", len(s.Unsplit), minSplitWindow)
}

// detail describes a sweep for the history: its counts, and its parts when
// it was split.
func (s splitSweep) detail() string {
	d := fmt.Sprintf("%v", s.Report.Counts)
	if s.Declined > 0 {
		d += fmt.Sprintf(", split in %d parts (%d windows declined as too large)", s.Parts, s.Declined)
	}
	if len(s.Unsplit) > 0 {
		d += fmt.Sprintf(", %d parts too short to split declined: %s", len(s.Unsplit), strings.Join(s.Unsplit, "; "))
	}
	return d
}

// compareSweeps judges the sweeps' findings against what the ledger and the
// final table (intents) say, per swept channel:
//   - orphan: each effect of an event that has no intent (an enqueue the
//     failover lost after its call was made), and each Stripe object created
//     for another intent than its event's (a call made for a lost intent,
//     the event enqueued again since), by the effect's reference;
//   - duplicate: each intent whose event the provider holds two effects or more of;
//   - unsettled: each intent not SENT (SENDING, IN_DOUBT, FAILED, SKIPPED,
//     CANCELLED, PENDING) whose effect the provider holds;
//   - missing: each SENT intent whose effect the provider lacks.
//
// A finding the checker does not expect, or an expected one the sweep lacks,
// is a violation naming the event and reference; after a synchronous
// failover any finding is one too, but a duplicate (a resend policy's) and an
// intent a skip or manual policy settled after a call whose answer was lost.
func compareSweeps(reps []effectdtype.SweepReport, intents []harnessdb.IntentTally, ledger sandbox.Snapshot, chans []Channel, sync bool) ([]SweepRow, []Violation) {
	a := expectFindings(intents, ledger)
	var rows []SweepRow
	bad := map[[2]string][]string{} // (rule, channel) → findings
	for _, c := range chans {
		if !sweptChannel(c) {
			continue
		}
		i := slices.IndexFunc(reps, func(r effectdtype.SweepReport) bool { return r.Channel == c.Name })
		if i < 0 {
			continue // its sweep failed: already a violation
		}
		rows = append(rows, a.compare(c, reps[i], sync, bad))
	}
	return rows, sortedViolations(bad)
}

// finding is a sweep finding, by kind, channel and what it names: the
// reference of an orphan, the event of any other.
type finding struct{ kind, channel, name string }

// sweepAccount is what the checker expects a sweep to find, from the intents
// and the ledger.
type sweepAccount struct {
	expected map[finding]bool
	// policyAnswered are the targets whose intent the channel's in-doubt
	// policy settled (SKIPPED or IN_DOUBT) after a call whose answer nobody
	// knew: their unsettled finding is that policy's, not a lost commit's
	policyAnswered map[target]bool
	byRef          map[string]target // the target of each effect, by its reference
	unjudged       map[target]bool   // targets whose findings are not judged (checkSweeps)
}

// expectFindings accounts for the findings the ledger and the intents call
// for: orphans, duplicates, unsettled intents with effects, and SENT intents
// without one.
func expectFindings(intents []harnessdb.IntentTally, ledger sandbox.Snapshot) sweepAccount {
	byEvent := map[target]*harnessdb.IntentTally{}
	a := sweepAccount{expected: map[finding]bool{}, byRef: map[string]target{}, policyAnswered: map[target]bool{}}
	for i, in := range intents {
		t := target{in.Channel, in.EventID}
		byEvent[t] = &intents[i]
		if (in.Status == "SKIPPED" || in.Status == "IN_DOUBT") && in.InDoubtSends > 0 {
			a.policyAnswered[t] = true
		}
	}
	effects := map[target][]string{} // refs of the effects of each target's intent
	for _, e := range ledger.Effects {
		t, ok := effectTarget(e)
		if !ok {
			continue
		}
		a.byRef[e.Ref] = t
		in := byEvent[t]
		// A Stripe object names the intent it was created for: one of a lost
		// intent is no intent's, even where the event was enqueued again (its
		// new intent's call then reuses the key with other metadata, which
		// Stripe refuses). An SMS names none: it is its event's.
		if in == nil || (e.Kind == "stripe" && stripeIntentID(e) != strconv.FormatInt(in.ID, 10)) {
			a.expected[finding{effectdtype.FindingOrphan, t.channel, e.Ref}] = true
			continue
		}
		effects[t] = append(effects[t], e.Ref)
	}
	for t, refs := range effects {
		if len(refs) > 1 {
			a.expected[finding{effectdtype.FindingDuplicate, t.channel, t.event}] = true
		}
		if in := byEvent[t]; in.Status != "SENT" {
			a.expected[finding{effectdtype.FindingUnsettled, t.channel, t.event}] = true
		}
	}
	for _, in := range intents {
		if in.Status == "SENT" && len(effects[target{in.Channel, in.EventID}]) == 0 {
			a.expected[finding{effectdtype.FindingMissing, in.Channel, in.EventID}] = true
		}
	}
	return a
}

// name is how a violation names a finding: its event and reference.
func (a sweepAccount) name(k finding) string {
	if k.kind != effectdtype.FindingOrphan {
		return k.name
	}
	if t, ok := a.byRef[k.name]; ok {
		return t.event + "/" + k.name
	}
	return "?/" + k.name
}

// compare counts channel c's findings in rep against the expected ones and
// adds to bad the findings on one side only.
func (a sweepAccount) compare(c Channel, rep effectdtype.SweepReport, sync bool, bad map[[2]string][]string) SweepRow {
	row := SweepRow{Channel: c, Intents: rep.Intents, Objects: rep.Objects, Found: map[string]int{}, Expected: map[string]int{}}
	found := map[finding]bool{}
	for _, f := range rep.Findings {
		k := finding{f.Kind, c.Name, f.EventID}
		if f.Kind == effectdtype.FindingOrphan && len(f.Objects) > 0 {
			k.name = f.Objects[0].Ref
		}
		found[k] = true
		row.Found[f.Kind]++
		if !a.expected[k] {
			rule := [2]string{"sweep: " + f.Kind + " finding the checker does not account for", c.Name}
			bad[rule] = append(bad[rule], a.name(k))
		}
	}
	for k := range a.expected {
		if k.channel != c.Name {
			continue
		}
		row.Expected[k.kind]++
		if !found[k] {
			rule := [2]string{"sweep: no " + k.kind + " finding where the checker counts one", c.Name}
			bad[rule] = append(bad[rule], a.name(k))
		}
	}
	if sync {
		// Nothing acknowledged is lost: no orphan, nothing unsettled or
		// missing. A duplicate is the channel's resend policy at work when
		// a call's answer was lost (the outage outlasted a lease); the
		// checker counts and explains those. So is an unsettled intent the
		// skip or manual policy settled after such a call, recorded as one
		// (a call maybe sent or in doubt, or no outcome before its lease
		// expired): the call was made, and nobody knew its answer.
		n := 0
		for _, f := range rep.Findings {
			policy := f.Kind == effectdtype.FindingUnsettled && a.policyAnswered[target{c.Name, f.EventID}]
			if f.Kind != effectdtype.FindingDuplicate && !policy {
				n++
			}
		}
		if n > 0 {
			rule := [2]string{fmt.Sprintf("sweep: %d findings other than duplicates after a synchronous failover, want none", n), c.Name}
			bad[rule] = append(bad[rule], "-")
		}
	}
	return row
}

// sortedViolations turns (rule, channel) → keys into violations, sorted by
// channel and rule, each with its keys sorted.
func sortedViolations(bad map[[2]string][]string) []Violation {
	var vs []Violation
	for k, keys := range bad {
		slices.Sort(keys)
		vs = append(vs, Violation{Rule: k[0], Channel: k[1], Keys: keys})
	}
	slices.SortFunc(vs, func(a, b Violation) int { return strings.Compare(a.Channel+a.Rule, b.Channel+b.Rule) })
	return vs
}

// stripeIntentID is the intent id in a Stripe effect's metadata, or "".
func stripeIntentID(e sandbox.Effect) string {
	var b struct {
		Metadata map[string]string `json:"metadata"`
	}
	if json.Unmarshal(e.Body, &b) != nil {
		return ""
	}
	return b.Metadata[effect.MetaIntentID]
}

// printSweep writes the sweeps' table: per channel, each kind of finding as
// the sweep reported it and as the checker expects it.
func (r *Report) printSweep(w io.Writer) {
	fmt.Fprintln(w, "\nreconciliation sweep after the failover (POST /v1/sweeps over the run's window), found/expected by the checker:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "channel\tprovider\tintents\tobjects\t")
	for _, k := range effectdtype.FindingKinds {
		fmt.Fprintf(tw, "%s\t", k)
	}
	fmt.Fprintln(tw)
	for _, x := range r.Sweep {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t", x.Channel.Name, x.Channel.Provider, x.Intents, x.Objects)
		for _, k := range effectdtype.FindingKinds {
			fmt.Fprintf(tw, "%d/%d\t", x.Found[k], x.Expected[k])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
