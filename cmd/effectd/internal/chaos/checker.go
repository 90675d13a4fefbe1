package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// The checker is independent of effectd's code: it reads the producers' log,
// effectd's tables (and the producers' own table) with plain SQL, and the
// sandbox ledger, and judges each committed (event, channel) by the rules of
// its channel's provider and policy.

// Channel is a channel as the checker needs it: its provider and policy.
type Channel struct {
	Name           string
	Provider       string // webhook | stripe | twilio
	InDoubt        string // lookup | resend | skip | manual
	LookupFallback string
}

// Row is one line of the table: a channel's counts.
type Row struct {
	Channel                          Channel
	Committed, Maybe, Intents        int
	States                           map[string]int
	Unsettled                        int // PENDING or SENDING after the drain
	Applied                          int // keys with at least one effect
	KeysTwice                        int // keys applied more than once
	Duplicates, Explained, Lost, Gap int // Gap: not applied, recorded as a policy state
	Fenced                           int // attempt rows "(fenced out)": late completions refused
	Pruned                           int // old intents retention dropped with their partitions (retention.go)
	Ambiguous                        int // lookups that could not tell

	// What a failover lost (see failoverLoss), with the run's failover only.
	EnqueuesLost      int // enqueues the producer saw committed that the standby never received, with the producer's rows
	Gone              int // of those, with no intent in the end (no redelivery enqueued the event again)
	AppliedLost       int // of those, applied by the provider before the kill
	UpdatesLost       int // intents whose claim or completion the promoted standby never received
	Resent            int // of those, called again after the promotion, having been called before the kill
	FailoverExplained int // duplicate effects of lost updates (Twilio, asynchronous replication)
}

// policy is the channel's in-doubt policy as the tables print it.
func (c Channel) policy() string {
	if c.InDoubt == "lookup" {
		return c.InDoubt + "/" + c.LookupFallback
	}
	return c.InDoubt
}

// Violation is one broken rule with the keys that break it.
type Violation struct {
	Rule    string
	Channel string
	Keys    []string
}

// Report is the checker's verdict.
type Report struct {
	Rows       []Row
	Violations []Violation
	Details    []string        // attempt rows of some offending intents
	Orphans    int             // effects that match no intent
	Failover   *FailoverReport // the run's failover; nil without one
	Sweep      []SweepRow      // the reconciliation sweep after the failover; nil without one
	Faults     map[string]int  // how many faults of each kind were injected
	// With actors: each invariant's verdict, and the history's operations
	// counted by actor, action and result.
	Invariants []InvariantRow
	History    string
	Operations int
}

// OK reports whether every rule held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// target is what an effect is for: one event on one channel.
type target struct{ channel, event string }

// check judges the run. events is the producers' log; ledger the sandbox's;
// loss what a failover lost (nil: no failover). Under asynchronous
// replication the enqueues it lost, with the producers' rows, and the Twilio
// duplicates of the claims and completions it lost are counted as its cost;
// under synchronous replication they break the rules.
// dec is what the operators decided (none without actors): it explains
// extra effects and an intent resolved as sent without one.
func check(ctx context.Context, pool *pgxpool.Pool, mode effectdtype.Storage, events map[string]Outcome, ledger sandbox.Snapshot, chans []Channel, loss *failoverLoss, dec decisions) (*Report, error) {
	intents, err := loadIntents(ctx, pool)
	if err != nil {
		return nil, err
	}
	delivered, err := loadDelivered(ctx, pool)
	if err != nil {
		return nil, err
	}
	c := newChecker(events, delivered, ledger, chans, loss)
	c.dec = dec
	c.matchIntents(intents)
	for ev, o := range events {
		if err := c.judgeEvent(ev, o); err != nil {
			return nil, err
		}
	}
	late, err := harnessdb.LateCompletions(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading attempts: %w", err)
	}
	for _, l := range late {
		c.flag("completion of an attempt already settled by the reconciler took effect (not fenced out)", l.Channel, l.EventID)
		c.suspects = append(c.suspects, l.ID)
	}
	if c.rep.Orphans > 0 {
		c.flag(fmt.Sprintf("%d effects not attributable to any event", c.rep.Orphans), "*", "-")
	}
	if err := c.judgeCounts(ctx, storage.New(mode, pool, storage.Leases{}), pool); err != nil {
		return nil, err
	}
	c.countFailover()
	rep := c.report(chans)
	rep.Details, err = attemptDetails(ctx, pool, c.suspects[:min(len(c.suspects), 8)])
	return rep, err
}

// checker is one check's state: what it read, the rows it counts, and the
// rules broken so far.
type checker struct {
	events                    map[string]Outcome
	delivered                 map[string]bool // events with a committed row in the producers' own table
	loss                      *failoverLoss   // nil: no failover
	excused                   bool            // the failover's losses are its cost, not broken rules
	calledBefore, calledAfter map[target]bool // the failover's kill and promotion
	dec                       decisions       // the operators' decisions

	applied   map[target]int // effects per target
	refs      map[target][]string
	byChannel map[string]*Row
	byEvent   map[target]*harnessdb.IntentTally
	bad       map[[2]string][]string // (rule, channel) → keys
	suspects  []int64                // intents whose attempts the report details
	rep       *Report
}

// newChecker counts the ledger's effects per target.
func newChecker(events map[string]Outcome, delivered map[string]bool, ledger sandbox.Snapshot, chans []Channel, loss *failoverLoss) *checker {
	c := &checker{
		events: events, delivered: delivered, loss: loss, excused: loss != nil && !loss.sync,
		applied: map[target]int{}, refs: map[target][]string{}, byChannel: map[string]*Row{},
		byEvent: map[target]*harnessdb.IntentTally{}, bad: map[[2]string][]string{}, rep: &Report{},
	}
	if loss != nil {
		c.calledBefore, c.calledAfter = callsAcross(ledger, loss.killed, loss.promoted)
	}
	for _, e := range ledger.Effects {
		t, ok := effectTarget(e)
		if !ok {
			c.rep.Orphans++
			continue
		}
		c.applied[t] += e.Applied
		c.refs[t] = append(c.refs[t], e.Ref)
	}
	for _, ch := range chans {
		c.byChannel[ch.Name] = &Row{Channel: ch, States: map[string]int{}}
	}
	return c
}

// flag records that key broke rule on channel.
func (c *checker) flag(rule, channel, key string) {
	k := [2]string{rule, channel}
	c.bad[k] = append(c.bad[k], key)
}

// lostEnqueue reports whether the enqueue of t, acknowledged to its producer
// as o, was lost in the failover.
func (c *checker) lostEnqueue(t target, o Outcome) bool {
	return c.loss != nil && c.loss.lostEnqueues[t] && o.Committed && o.FirstCommit.Before(c.loss.killed)
}

// matchIntents indexes the intents by target and flags those no producer
// committed, and effects without an intent.
func (c *checker) matchIntents(intents []harnessdb.IntentTally) {
	for i := range intents {
		in := &intents[i]
		if c.byEvent[target{in.Channel, in.EventID}] != nil {
			c.flag("two or more intents for one event", in.Channel, in.EventID)
		}
		c.byEvent[target{in.Channel, in.EventID}] = in
		o, known := c.events[in.EventID]
		if !known || o.Channel != in.Channel {
			c.flag("intent for an event no producer enqueued", in.Channel, in.EventID)
			continue
		}
		if !o.Committed && !o.Maybe && !c.delivered[in.EventID] {
			c.flag("intent for a rolled-back event", in.Channel, in.EventID)
		}
	}
	for t := range c.applied {
		if c.byEvent[t] == nil && !(c.excused && c.lostEnqueue(t, c.events[t.event])) {
			c.flag("effect without an intent", t.channel, t.event)
		}
	}
}

// judgeEvent counts event ev, as its producer saw it (o), in its channel's
// row and flags the rules it breaks.
func (c *checker) judgeEvent(ev string, o Outcome) error {
	row := c.byChannel[o.Channel]
	if row == nil {
		return fmt.Errorf("chaos: event %s on unknown channel %q", ev, o.Channel)
	}
	t := target{o.Channel, ev}
	committed := o.Committed || c.delivered[ev]
	switch {
	case committed:
		row.Committed++
	case o.Maybe:
		row.Maybe++
	}
	// an enqueue acknowledged to the producer and lost in the failover
	lostEnqueue := c.lostEnqueue(t, o)
	if lostEnqueue {
		row.EnqueuesLost++
		if c.calledBefore[t] {
			row.AppliedLost++
		}
		if !c.excused {
			c.flag("enqueue acknowledged to its producer, lost in the failover", o.Channel, ev)
		}
	}
	// a redelivery enqueued again what the failover lost: true twice
	if committed && !o.Maybe && o.Inserted != 1 && !(c.excused && lostEnqueue && o.Inserted == 2) {
		c.flag(fmt.Sprintf("enqueue returned true %d times, want once", o.Inserted), o.Channel, ev)
	}
	in := c.byEvent[t]
	if in == nil && o.Expires {
		row.Pruned++ // judgeRetention judges whether it could go
		return nil
	}
	if in == nil {
		switch {
		case lostEnqueue && !c.delivered[ev]:
			row.Gone++
		case committed:
			row.Lost++
			c.flag("committed but no intent", o.Channel, ev)
		}
		if c.applied[t] > 0 && !committed {
			c.flag("effect for an event that never committed", o.Channel, ev)
		}
		return nil
	}
	c.judgeIntent(row, t, in, lostEnqueue)
	return nil
}

// judgeIntent counts the intent in of t and its effects in row and flags the
// rules they break: unsettled, lost, a wrong ref, unexplained duplicates.
func (c *checker) judgeIntent(row *Row, t target, in *harnessdb.IntentTally, lostEnqueue bool) {
	row.Intents++
	row.States[string(in.Status)]++
	row.Fenced += in.FencedOut
	row.Ambiguous += in.Ambiguous
	n := c.applied[t]
	if n > 0 {
		row.Applied++
	}
	if in.Status == "PENDING" || in.Status == "SENDING" {
		row.Unsettled++
		c.flag("not settled after the drain ("+string(in.Status)+")", t.channel, t.event)
	}
	if n == 0 {
		switch in.Status {
		case "SKIPPED", "IN_DOUBT", "FAILED", "CANCELLED":
			row.Gap++
			// CANCELLED is its producer's decision, judged by judgeCancels
			if row.Channel.InDoubt == "skip" && in.Status != "SKIPPED" && in.Status != "CANCELLED" {
				c.flag("gap not recorded as SKIPPED ("+string(in.Status)+")", t.channel, t.event)
			}
		default:
			if in.Status == "SENT" && c.dec.sent[t] {
				row.Gap++ // an operator resolved it as sent
				return
			}
			row.Lost++
			c.flag("lost: committed, "+string(in.Status)+", never applied", t.channel, t.event)
			c.suspects = append(c.suspects, in.ID)
		}
		return
	}
	if in.Status == "SENT" && in.ProviderRef != "" && row.Channel.Provider != "webhook" && !slices.Contains(c.refs[t], in.ProviderRef) {
		c.flag("SENT with a provider_ref that is not its effect", t.channel, t.event)
		c.suspects = append(c.suspects, in.ID)
	}
	if n >= 2 {
		c.judgeDuplicates(row, t, in, n, lostEnqueue)
	}
}

// judgeDuplicates counts the n-1 extra effects of in and flags those that
// neither its channel's policy nor the failover explains.
func (c *checker) judgeDuplicates(row *Row, t target, in *harnessdb.IntentTally, n int, lostEnqueue bool) {
	row.KeysTwice++
	extra := n - 1
	row.Duplicates += extra
	explained := 0
	if row.Channel.Provider == "twilio" {
		switch row.Channel.InDoubt {
		case "lookup":
			explained = in.AmbiguousResend
		case "resend":
			explained = in.AmbiguousResend + in.PolicyResend
		}
	}
	explained = min(explained+c.dec.resends[t], extra)
	row.Explained += explained
	if c.excused && row.Channel.Provider == "twilio" && (c.loss.lostUpdates[t] || lostEnqueue) {
		row.FailoverExplained += extra - explained
		explained = extra
	}
	if explained < extra {
		c.flag(fmt.Sprintf("applied %d times, %d unexplained", n, extra-explained), t.channel, t.event)
		c.suspects = append(c.suspects, in.ID)
	}
}

// countFailover counts, per channel, the updates the failover lost and the
// targets called again after it.
func (c *checker) countFailover() {
	if c.loss == nil {
		return
	}
	for t := range c.loss.lostUpdates {
		if row := c.byChannel[t.channel]; row != nil {
			row.UpdatesLost++
		}
	}
	for t := range c.calledBefore {
		if row := c.byChannel[t.channel]; row != nil && c.calledAfter[t] && (c.loss.lostUpdates[t] || c.loss.lostEnqueues[t]) {
			row.Resent++
		}
	}
}

// report is the verdict: the rows in the order of chans, the violations sorted.
func (c *checker) report(chans []Channel) *Report {
	rep := c.rep
	for _, ch := range chans {
		rep.Rows = append(rep.Rows, *c.byChannel[ch.Name])
	}
	rep.Violations = sortedViolations(c.bad)
	return rep
}

// loadDelivered returns the events with a committed row in the producers' own table.
func loadDelivered(ctx context.Context, pool *pgxpool.Pool) (map[string]bool, error) {
	events, err := producerColumn(ctx, pool, deliveredEventsSQL)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the producers' table: %w", err)
	}
	delivered := map[string]bool{}
	for _, e := range events {
		delivered[e] = true
	}
	return delivered, nil
}

// loadIntents reads every intent with the counts of its attempts.
func loadIntents(ctx context.Context, pool *pgxpool.Pool) ([]harnessdb.IntentTally, error) {
	intents, err := harnessdb.TallyIntents(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading intents: %w", err)
	}
	return intents, nil
}

// effectTarget attributes an effect to (channel, event) from what the
// provider received: the webhook body's "event", Stripe's metadata
// effectd_event_id, Twilio's body "<channel> <event>" (sent to a number of
// its own).
func effectTarget(e sandbox.Effect) (t target, ok bool) {
	switch e.Kind {
	case "webhook":
		var b struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(e.Body, &b) != nil || b.Event == "" {
			return t, false
		}
		t.channel, t.event = "hook", b.Event
	case "stripe":
		var b struct {
			Metadata map[string]string `json:"metadata"`
		}
		if json.Unmarshal(e.Body, &b) != nil || b.Metadata[effect.MetaEventID] == "" {
			return t, false
		}
		t.channel, t.event = "refund", b.Metadata[effect.MetaEventID]
	case "twilio":
		var b struct {
			To   string `json:"to"`
			Body string `json:"body"`
		}
		if json.Unmarshal(e.Body, &b) != nil {
			return t, false
		}
		ch, ev, found := strings.Cut(b.Body, " ")
		if !found || b.To != smsNumber(eventIndex(ev)) {
			return t, false
		}
		t.channel, t.event = ch, ev
	default:
		return t, false
	}
	return t, true
}

// eventIndex is n of "evt-n", or -1.
func eventIndex(ev string) int {
	var n int
	if _, err := fmt.Sscanf(ev, "evt-%d", &n); err != nil {
		return -1
	}
	return n
}

// attemptDetails lists the attempt rows of ids, for the report.
func attemptDetails(ctx context.Context, pool *pgxpool.Pool, ids []int64) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	trails, err := harnessdb.AttemptTrails(ctx, pool, ids)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range trails {
		out = append(out, fmt.Sprintf("intent %d %s/%s %s ref=%s | #%d %s %s→%s %q ref=%s err=%q",
			a.IntentID, a.Channel, a.EventID, a.Status, a.ProviderRef, a.Attempt, a.Kind, a.Started, a.Finished, a.Outcome, a.AttemptRef, a.Error))
	}
	return out, nil
}

// Print writes the table, then every violation with its keys.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "channel\tprovider\tpolicy\tcommitted\tmaybe\tintents\tSENT\tFAILED\tSKIPPED\tIN_DOUBT\tCANCELLED\tunsettled\tapplied\tkeys>1\tdup effects\texplained\tambiguous\tfenced out\tgap\tlost\tpruned\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			x.Channel.Name, x.Channel.Provider, x.Channel.policy(), x.Committed, x.Maybe, x.Intents,
			x.States["SENT"], x.States["FAILED"], x.States["SKIPPED"], x.States["IN_DOUBT"], x.States["CANCELLED"],
			x.Unsettled, x.Applied, x.KeysTwice, x.Duplicates, x.Explained, x.Ambiguous, x.Fenced, x.Gap, x.Lost, x.Pruned)
	}
	tw.Flush()
	if r.Failover != nil {
		r.printFailover(w)
	}
	if r.Sweep != nil {
		r.printSweep(w)
	}
	if r.Invariants != nil {
		r.printInvariants(w)
	}
	if r.OK() {
		fmt.Fprintln(w, "checker: PASS — lost 0, unexplained duplicates 0, every intent settled")
		return
	}
	fmt.Fprintf(w, "checker: FAIL — %d rules broken\n", len(r.Violations))
	for _, v := range r.Violations {
		keys := v.Keys
		more := ""
		if len(keys) > 20 {
			keys, more = keys[:20], fmt.Sprintf(" … and %d more", len(v.Keys)-20)
		}
		fmt.Fprintf(w, "  [%s] %s: %d: %s%s\n", v.Channel, v.Rule, len(v.Keys), strings.Join(keys, " "), more)
	}
	for _, d := range r.Details {
		fmt.Fprintln(w, "  "+d)
	}
}

// callsAcross returns the targets whose effect a provider call applied
// before killed, and the targets the provider was called for after promoted.
func callsAcross(ledger sandbox.Snapshot, killed, promoted time.Time) (before, after map[target]bool) {
	// a call names its effect by the idempotency key or webhook-id, a Twilio
	// call by the message it created
	byKey := map[string]target{}
	for _, e := range ledger.Effects {
		if t, ok := effectTarget(e); ok {
			byKey[e.Kind+"\x00"+e.Key] = t
		}
	}
	before, after = map[target]bool{}, map[target]bool{}
	for _, c := range ledger.Calls {
		key := c.Key
		if c.Kind == "twilio" {
			key = c.Ref
		}
		t, ok := byKey[c.Kind+"\x00"+key]
		if !ok || c.Method != http.MethodPost {
			continue
		}
		switch {
		case c.Applied && c.At.Before(killed):
			before[t] = true
		case c.At.After(promoted):
			after[t] = true
		}
	}
	return before, after
}

// judgeCounts compares the counts by status that operators read (GET
// /v1/stats: storage.Operator.ChannelCounts, kept as changes happen, never a scan) with
// a count of the rows, per channel and status: a crash between a change and
// its count, or a change that forgot to count, shows here.
func (c *checker) judgeCounts(ctx context.Context, store storage.Operator, pool *pgxpool.Pool) error {
	kept, err := store.ChannelCounts(ctx, pool, nil)
	if err != nil {
		return fmt.Errorf("chaos: reading the counts: %w", err)
	}
	read := map[string]int64{}
	for _, k := range kept {
		read[k.Channel+" "+string(k.Status)] = k.N
	}
	rows, err := pool.Query(ctx, `SELECT channel || ' ' || status, count(*) FROM effectd.intents GROUP BY 1`)
	if err != nil {
		return fmt.Errorf("chaos: counting intents: %w", err)
	}
	counted, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Key string
		N   int64
	}])
	if err != nil {
		return fmt.Errorf("chaos: counting intents: %w", err)
	}
	for _, r := range counted {
		if read[r.Key] != r.N {
			channel, status, _ := strings.Cut(r.Key, " ")
			c.flag(fmt.Sprintf("the counts read %d %s, the rows %d", read[r.Key], status, r.N), channel, status)
		}
		delete(read, r.Key)
	}
	for k, n := range read {
		channel, status, _ := strings.Cut(k, " ")
		c.flag(fmt.Sprintf("the counts read %d %s, the rows none", n, status), channel, status)
	}
	return nil
}
