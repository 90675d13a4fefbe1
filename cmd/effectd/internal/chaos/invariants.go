package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// The invariants a run with actors is judged by; every rule the checker
// flags belongs to one (invariantOf).
const (
	InvOneEffect   = "at most one provider effect per (event_id, channel) unless a recorded policy or operator decision explains another"
	InvDedupe      = "a redelivery never makes a second intent, at any isolation level or day; a producer is refused only with a retryable SQLSTATE"
	InvOwnIntent   = "no intent is changed by a message about another"
	InvNothingLost = "nothing is lost without a recorded decision (and the counts operators read equal the rows)"
	InvSweepTrue   = "every sweep finding is true"
	InvSweepFound  = "every real discrepancy is found by a sweep of the whole history"
)

// Invariants lists them in the order of the summary.
var Invariants = []string{InvOneEffect, InvDedupe, InvOwnIntent, InvNothingLost, InvSweepTrue, InvSweepFound}

// invariantOf is the invariant a rule of the checker belongs to.
func invariantOf(rule string) string {
	switch {
	case strings.HasPrefix(rule, "sweep: no "):
		return InvSweepFound
	case strings.HasPrefix(rule, "sweep"):
		return InvSweepTrue
	case strings.Contains(rule, "intents for one event"), strings.HasPrefix(rule, "enqueue returned true"),
		strings.HasPrefix(rule, "producer refused"):
		return InvDedupe
	case strings.HasPrefix(rule, "applied "), strings.HasPrefix(rule, "effect "), strings.Contains(rule, "effects not attributable"):
		return InvOneEffect
	case strings.Contains(rule, "another intent"), strings.Contains(rule, "not its effect"), strings.Contains(rule, "not fenced out"):
		return InvOwnIntent
	}
	return InvNothingLost
}

// InvariantRow is one invariant's verdict: the rules of it broken, and the
// keys breaking them.
type InvariantRow struct {
	Name        string
	Rules, Keys int
}

// invariantRows sums the violations by invariant.
func invariantRows(vs []Violation) []InvariantRow {
	rows := make([]InvariantRow, len(Invariants))
	for i, name := range Invariants {
		rows[i].Name = name
	}
	for _, v := range vs {
		for i := range rows {
			if rows[i].Name == invariantOf(v.Rule) {
				rows[i].Rules++
				rows[i].Keys += len(v.Keys)
			}
		}
	}
	return rows
}

// printInvariants writes the per-invariant summary and the history's counts.
func (r *Report) printInvariants(w io.Writer) {
	fmt.Fprintf(w, "\nhistory: %d operations\n%s", r.Operations, r.History)
	fmt.Fprintln(w, "invariants:")
	for _, x := range r.Invariants {
		verdict := "holds"
		if x.Rules > 0 {
			verdict = fmt.Sprintf("VIOLATED (%d rules, %d keys)", x.Rules, x.Keys)
		}
		fmt.Fprintf(w, "  %-8s %s\n", verdict, x.Name)
	}
}

// sweepWindow is one window the checker sweeps after the drain, and whether
// its findings must be complete (the whole history) or only true.
type sweepWindow struct {
	name         string
	since, until time.Time
	complete     bool
}

// sweepWindows are the windows of a run that started at start: the whole
// history (intents moved a day either way included), today's run, the day
// before (the intents moved into it, whose objects are today's), and two
// random windows inside the run.
func sweepWindows(rng *rand.Rand, start, now time.Time) []sweepWindow {
	ws := []sweepWindow{
		{"history", start.Add(-48 * time.Hour), now.Add(48 * time.Hour), true},
		{"today", start.Add(-time.Minute), now, false},
		{"yesterday", start.Add(-24*time.Hour - time.Minute), now.Add(-24*time.Hour + time.Minute), false},
	}
	run := now.Sub(start)
	for i := range 2 {
		a := start.Add(time.Duration(rng.Float64() * float64(run)))
		b := a.Add(time.Duration(rng.Float64() * float64(now.Sub(a))))
		if b.After(a) {
			ws = append(ws, sweepWindow{fmt.Sprintf("random %d", i+1), a, b, false})
		}
	}
	return ws
}

// checkSweeps sweeps every swept channel over each window through an
// instance's admin API (a window the API declines as too large in halves, as
// sweepSplitting does, judged as one), records each sweep in the history, and judges its
// findings against the final intents and the ledger: each must be true;
// over the whole history, every true one must be found (an uncertain
// finding stands for a missing one: it claims nothing).
// An intent moved a day ahead is younger than its provider objects, which
// no real history has (an intent precedes its calls): findings about its
// event are not judged.
func (h *harness) checkSweeps(ctx context.Context, intents []harnessdb.IntentTally, ledger sandbox.Snapshot, events map[string]Outcome) []Violation {
	addr, _ := h.instances[0].addr.Load().(string)
	c := &client.Client{BaseURL: addr}
	a := expectFindings(intents, ledger)
	a.unjudged = map[target]bool{}
	for ev, o := range events {
		if o.Ahead {
			a.unjudged[target{o.Channel, ev}] = true
		}
	}
	bad := map[[2]string][]string{}
	for _, w := range sweepWindows(rand.New(rand.NewPCG(h.cfg.Seed, 6)), h.start, time.Now()) {
		for _, ch := range h.cfg.Channels {
			if !sweptChannel(ch) {
				continue
			}
			s, err := sweepSplitting(ctx, c, ch.Name, w.since, w.until)
			op := Op{At: time.Now(), Actor: "sweep", Action: w.name, Channel: ch.Name, Result: "ok"}
			if s.Declined > 0 {
				op.Result = "ok, split"
			}
			if err != nil {
				op.Result, op.Detail = "unknown", err.Error()
				h.hist.add(op)
				rule := [2]string{"sweep failed (" + w.name + "): " + err.Error(), ch.Name}
				bad[rule] = append(bad[rule], "-")
				continue
			}
			if len(s.Unsplit) > 0 {
				// The parts that answered are judged true; the window's
				// findings are not complete without the others.
				op.Result, w.complete = "partly swept", false
				rule := [2]string{strings.Replace(s.unsplitRule(), "sweep:", "sweep ("+w.name+"):", 1), ch.Name}
				bad[rule] = append(bad[rule], s.Unsplit...)
			}
			op.Detail = s.detail()
			h.hist.add(op)
			a.judge(ch, w, s.Report, bad)
		}
	}
	return sortedViolations(bad)
}

// judge adds to bad each finding of rep that is not true and, when w is
// complete, each true finding rep lacks.
func (a sweepAccount) judge(c Channel, w sweepWindow, rep effectdtype.SweepReport, bad map[[2]string][]string) {
	found := map[finding]bool{}
	for _, f := range rep.Findings {
		k := finding{f.Kind, c.Name, f.EventID}
		if f.Kind == effectdtype.FindingOrphan && len(f.Objects) > 0 {
			k.name = f.Objects[0].Ref
		}
		found[k] = true
		if a.unjudgedFinding(k) {
			continue
		}
		if f.Kind != effectdtype.FindingUncertain && !a.expected[k] {
			rule := [2]string{"sweep (" + w.name + "): " + f.Kind + " finding that is not true", c.Name}
			bad[rule] = append(bad[rule], a.name(k))
		}
	}
	if !w.complete {
		return
	}
	for k := range a.expected {
		if k.channel != c.Name || found[k] || a.unjudgedFinding(k) {
			continue
		}
		if k.kind == effectdtype.FindingMissing && found[finding{effectdtype.FindingUncertain, k.channel, k.name}] {
			continue
		}
		rule := [2]string{"sweep: no " + k.kind + " finding where the checker counts one (" + w.name + ")", c.Name}
		bad[rule] = append(bad[rule], a.name(k))
	}
}

// unjudgedFinding reports whether k is about an event whose findings are not judged.
func (a sweepAccount) unjudgedFinding(k finding) bool {
	if k.kind == effectdtype.FindingOrphan {
		t, ok := a.byRef[k.name]
		return ok && a.unjudged[t]
	}
	return a.unjudged[target{k.channel, k.name}]
}

// judgeHistory flags what the history shows broken: an operator's action
// answered with another intent, a producer's refusal no retry cures, and an
// audit entry on an intent no operator action or producer's cancel named.
func judgeHistory(ctx context.Context, pool *pgxpool.Pool, ops []Op, refusals map[string][]string, intents []harnessdb.IntentTally) ([]Violation, error) {
	bad := map[[2]string][]string{}
	for _, op := range ops {
		switch {
		case op.Actor == "operator" && op.Result == "ok" && strings.HasPrefix(op.Detail, "answered with intent"):
			rule := [2]string{op.Action + " of one intent changed another intent", op.Channel}
			bad[rule] = append(bad[rule], fmt.Sprintf("%s (%s)", op.Event, op.Detail))
		case op.Actor == "producer" && op.Result == "refused":
			rule := [2]string{"producer refused (" + op.Action + "): " + op.Detail, op.Channel}
			bad[rule] = append(bad[rule], "-")
		}
	}
	for state, events := range refusals {
		rule := [2]string{"producer refused with " + state, "*"}
		bad[rule] = append(bad[rule], events...)
	}
	dec := decide(ops)
	byID := map[int64]target{}
	for _, in := range intents {
		byID[in.ID] = target{in.Channel, in.EventID}
	}
	rows, err := pool.Query(ctx, `SELECT intent_id, action FROM effectd.audit WHERE intent_id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the audit: %w", err)
	}
	audits, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID     int64
		Action string
	}])
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the audit: %w", err)
	}
	for _, a := range audits {
		t, ok := byID[a.ID]
		if ok && !dec.named[t] {
			rule := [2]string{"audit entry " + a.Action + " on an intent no operator action or producer's cancel named (another intent changed)", t.channel}
			bad[rule] = append(bad[rule], t.event)
		}
	}
	return sortedViolations(bad), nil
}
