package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/statemachine"
)

// Sweep bounds.
const (
	// SweepMaxWindow is the longest window one sweep reads.
	SweepMaxWindow = time.Duration(policy.MaxSweepWindow)
	// SweepMaxIntents is the most intents one sweep reads from its window.
	SweepMaxIntents = 100_000
	// sweepSkew widens the provider listing on both sides of the window, for
	// clock skew between effectd and the provider.
	sweepSkew = 5 * time.Minute
	// sweepMaxHeld is the most intents one sweep looks up at the provider one
	// by one (Lister.Held): SENT intents whose effect the listing lacks, and
	// intents claimed after the listing's end.
	sweepMaxHeld = 200
	// sweepLateListing is how far past its window the listing follows the
	// window's intents claimed late (a retry, a resend): an intent claimed
	// later still (an operator's resend hours on) is looked up one by one
	// instead, so that one late claim never makes the listing span the
	// provider's busiest hours and refuse the window as too large.
	sweepLateListing = 15 * time.Minute
	// sweepMaxUnsettled is the most unsettled intents outside the window one
	// sweep considers as owners of the objects it joined to no intent.
	sweepMaxUnsettled = 10_000
	// sweepMaxWindows is the most windows of the scheduled sweep a report
	// reads to say what the schedule covered: a week of a sweep every minute.
	sweepMaxWindows = 10_080
)

// ErrListing is wrapped by a sweep whose provider listing failed: the
// provider did not answer, refused, or holds more than a listing reads.
var ErrListing = errors.New("the provider's listing failed")

// sweptIntent is an intent as the sweep reads it, with the objects joined to it.
type sweptIntent struct {
	id        int64
	eventID   string
	channel   string
	payload   json.RawMessage
	status    statemachine.State
	ref       *string
	created   time.Time
	claimed   *time.Time
	leaseLive bool
	inWindow  bool
	// claimedLate: claimed after the listing's end, so its effect is looked
	// up one by one (lookHeld) rather than listed.
	claimedLate bool

	match   string
	listed  bool
	objects []effect.Object
	// absent is set when Lister.Held proved that the provider holds no
	// effect of the intent whatever its time; unsure says why it could not.
	absent bool
	unsure string
}

// Sweep lists what channel's provider holds for the intents created in
// [since, until) and joins it with the table, reporting orphans, duplicates,
// unsettled intents and missing effects. It is read-only. A window longer
// than SweepMaxWindow or holding more than SweepMaxIntents intents, and a
// channel whose provider cannot list (a webhook), are ErrInvalid naming the
// field; a channel not configured here is ErrNotFound.
func (d *Dispatcher) Sweep(ctx context.Context, channel string, since, until time.Time) (rep effectdtype.SweepReport, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "Sweep(%q)", channel)
		}
	}()
	if err := checkSweepWindow(channel, since, until); err != nil {
		return rep, err
	}
	ch := d.byName[channel]
	if ch == nil {
		return rep, fmt.Errorf("channel %q: %w", channel, ErrNotFound)
	}
	lister, ok := ch.Provider.(Lister)
	if !ok {
		return rep, fmt.Errorf("%w: channel: %q is a %s channel, whose provider cannot list what it holds", ErrInvalid, channel, ch.Kind)
	}
	rep = effectdtype.SweepReport{Channel: channel, Provider: ch.Kind, Since: since.UTC(), Until: until.UTC(), Counts: map[string]int{}, Findings: []effectdtype.Finding{}}
	for _, k := range effectdtype.FindingKinds {
		rep.Counts[k] = 0
	}

	rows, err := readdb.SweepIntents(ctx, d.pool, readdb.SweepWindow{Channel: channel, Since: since, Until: until, Limit: SweepMaxIntents + 1})
	if err != nil {
		return rep, err
	}
	intents := swept(rows)
	if len(intents) > SweepMaxIntents {
		return rep, fmt.Errorf("%w: since: more than %d intents were created in the window: sweep a shorter one", ErrInvalid, SweepMaxIntents)
	}
	rep.Intents = len(intents)
	listUntil := until
	for _, in := range intents {
		in.inWindow = true
		in.match, in.listed = lister.Match(in.payload)
		if in.claimed != nil && in.claimed.After(listUntil) && !in.claimed.After(until.Add(sweepLateListing)) {
			listUntil = *in.claimed // a late send's object is listed too
		}
	}
	for _, in := range intents {
		in.claimedLate = in.claimed != nil && in.claimed.After(listUntil)
	}
	rep.ListedSince, rep.ListedUntil = since.Add(-sweepSkew).UTC(), listUntil.Add(sweepSkew).UTC()
	objects, err := lister.List(ctx, rep.ListedSince, rep.ListedUntil)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrListing, err)
	}
	rep.Objects = len(objects)

	j := newJoin(channel, intents)
	unmatched := j.byIdentity(objects)
	if len(unmatched) > 0 {
		if unmatched, err = d.joinOutsideWindow(ctx, j, lister, unmatched); err != nil {
			return rep, err
		}
	}
	for _, o := range unmatched {
		if o.Created.Before(since) || !o.Created.Before(until) {
			continue // outside the window: its intent may be too
		}
		rep.Findings = append(rep.Findings, effectdtype.Finding{Kind: effectdtype.FindingOrphan, Objects: []effect.Object{o},
			Operation: "no intent of this channel has it: check " + o.Ref + " at the provider and reverse it there if it was not meant; effectd has nothing to settle"})
	}
	lookHeld(ctx, lister, j)
	if rep.Scheduled, err = d.sweepCoverage(ctx, channel, since, until); err != nil {
		return rep, err
	}
	for _, in := range j.intents {
		if in.channel != channel {
			continue
		}
		rep.Findings = append(rep.Findings, judge(in, ch.Kind, time.Now())...)
		if in.inWindow && in.status == statemachine.Sent && !in.listed {
			rep.Unlisted++
		}
	}
	d.countSweep(ctx, &rep)
	return rep, nil
}

// checkSweepWindow refuses a sweep without a channel or with a window that
// is empty, reversed or longer than SweepMaxWindow.
func checkSweepWindow(channel string, since, until time.Time) error {
	switch {
	case channel == "":
		return fmt.Errorf("%w: channel: is required", ErrInvalid)
	case since.IsZero():
		return fmt.Errorf("%w: since: is required", ErrInvalid)
	case until.IsZero():
		return fmt.Errorf("%w: until: is required", ErrInvalid)
	case !since.Before(until):
		return fmt.Errorf("%w: since: %s is not before until %s", ErrInvalid, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	case until.Sub(since) > SweepMaxWindow:
		return fmt.Errorf("%w: until: the window is %s long, more than the %s a sweep reads: sweep it in parts",
			ErrInvalid, until.Sub(since).Round(time.Second), SweepMaxWindow)
	}
	return nil
}

// joinOutsideWindow joins the objects no intent of the window has with the
// intents created outside it, so that none is taken for an orphan while an
// intent could own it: those found by the objects' intent ids and
// references, and every intent of the channel not settled as sent that may
// have made a call (SENDING, IN_DOUBT, FAILED, SKIPPED, CANCELLED, PENDING
// after an attempt), whatever its age, that was created before the latest of the
// objects and settled after the earliest. It returns the objects still
// unmatched.
func (d *Dispatcher) joinOutsideWindow(ctx context.Context, j *join, lister Lister, unmatched []effect.Object) ([]effect.Object, error) {
	var ids []int64
	var refs []string
	first, last := unmatched[0].Created, unmatched[0].Created
	for _, o := range unmatched {
		if id, err := strconv.ParseInt(o.IntentID, 10, 64); err == nil {
			ids = append(ids, id)
		}
		refs = append(refs, o.Ref)
		first, last = minTime(first, o.Created), maxTime(last, o.Created)
	}
	rows, err := readdb.SweepIntentsBy(ctx, d.pool, ids, refs)
	if err != nil {
		return nil, err
	}
	unsettled, err := readdb.SweepIntentsUnsettled(ctx, d.pool, readdb.SweepUnsettled{Channel: j.channel,
		First: first.Add(-sweepSkew), Last: last.Add(sweepSkew), Limit: sweepMaxUnsettled + 1})
	if err != nil {
		return nil, err
	}
	if len(unsettled) > sweepMaxUnsettled {
		return nil, fmt.Errorf("%w: since: more than %d unsettled intents of the channel (SENDING, IN_DOUBT, FAILED, SKIPPED, CANCELLED, PENDING after an attempt) could own the provider objects no intent of the window has: settle them first, or sweep a shorter window", ErrInvalid, sweepMaxUnsettled)
	}
	for _, in := range swept(append(rows, unsettled...)) {
		in.match, in.listed = lister.Match(in.payload)
		j.add(in)
	}
	return j.byMatch(j.byIdentity(unmatched)), nil
}

// lookHeld looks up at the provider, one by one and whatever their time, the
// effects of the window's SENT intents whose effect the listing lacks, and of
// its intents claimed after the listing's end whatever their status (at most
// sweepMaxHeld in all), so that an effect made after the listing's end (a
// lookup that replayed the call, an operator's resend hours later) is neither
// reported missing nor left out. Each found object joins the intent; an
// intent with none is absent when the provider proved it, else unsure, with
// the reason.
func lookHeld(ctx context.Context, lister Lister, j *join) {
	looked := 0
	for _, in := range j.intents {
		if in.channel != j.channel || !in.inWindow || !in.listed || len(in.objects) > 0 {
			continue
		}
		if in.status != statemachine.Sent && !in.claimedLate {
			continue
		}
		if looked == sweepMaxHeld {
			in.unsure = fmt.Sprintf("the sweep looks up at most %d intents one by one: sweep a shorter window", sweepMaxHeld)
			continue
		}
		looked++
		meta := map[string]string{effect.MetaEventID: in.eventID, effect.MetaIntentID: strconv.FormatInt(in.id, 10)}
		objects, proven, err := lister.Held(ctx, deref(in.ref), in.payload, meta, in.created)
		switch {
		case err != nil:
			in.unsure = "its lookup at the provider failed: " + err.Error()
		case len(objects) > 0:
			in.objects = objects
		case proven:
			in.absent = true
		default:
			in.unsure = "the provider's lookup by the intent's reference and identity cannot prove the effect absent"
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sweepCoverage reads what channel's scheduled sweeps finished of
// [since, until): the windows they covered, merged where they overlap or
// adjoin and cut to the span, and the gaps between.
func (d *Dispatcher) sweepCoverage(ctx context.Context, channel string, since, until time.Time) (effectdtype.SweepCoverage, error) {
	windows, err := readdb.SweptWindows(ctx, d.pool, channel, since, until, sweepMaxWindows)
	if err != nil {
		return effectdtype.SweepCoverage{}, err
	}
	c := effectdtype.SweepCoverage{Covered: []effectdtype.SweepWindow{}, Gaps: []effectdtype.SweepWindow{}}
	at := since // the span before at is covered or a gap already
	for _, w := range windows {
		from, to := maxTime(w.Since, since), minTime(w.Until, until)
		if from.After(at) {
			c.Gaps = append(c.Gaps, effectdtype.SweepWindow{Since: at.UTC(), Until: from.UTC()})
		}
		if n := len(c.Covered); n > 0 && !from.After(c.Covered[n-1].Until) {
			c.Covered[n-1].Until = maxTime(c.Covered[n-1].Until, to.UTC())
		} else {
			c.Covered = append(c.Covered, effectdtype.SweepWindow{Since: from.UTC(), Until: to.UTC()})
		}
		at = maxTime(at, to)
	}
	if at.Before(until) {
		c.Gaps = append(c.Gaps, effectdtype.SweepWindow{Since: at.UTC(), Until: until.UTC()})
	}
	return c, nil
}

// countSweep counts rep's findings by kind, in rep and in the metrics, and logs them.
func (d *Dispatcher) countSweep(ctx context.Context, rep *effectdtype.SweepReport) {
	for _, f := range rep.Findings {
		rep.Counts[f.Kind]++
	}
	for k, n := range rep.Counts {
		d.m.sweepFindings.WithLabelValues(rep.Channel, k).Add(float64(n))
	}
	d.log.InfoContext(ctx, "sweep", "channel", rep.Channel, "since", rep.Since, "until", rep.Until,
		"intents", rep.Intents, "objects", rep.Objects, "orphan", rep.Counts[effectdtype.FindingOrphan], "duplicate", rep.Counts[effectdtype.FindingDuplicate],
		"unsettled", rep.Counts[effectdtype.FindingUnsettled], "missing", rep.Counts[effectdtype.FindingMissing],
		"uncertain", rep.Counts[effectdtype.FindingUncertain])
}

// swept returns the intents the sweep joins, as read.
func swept(rows []readdb.SweptIntent) []*sweptIntent {
	out := make([]*sweptIntent, len(rows))
	for i, r := range rows {
		out[i] = &sweptIntent{id: r.ID, eventID: r.EventID, channel: r.Channel, payload: r.Payload, status: r.Status,
			ref: r.ProviderRef, created: r.CreatedAt, claimed: r.ClaimedAt,
			leaseLive: r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(time.Now())}
	}
	return out
}

// join matches provider objects to intents.
type join struct {
	intents []*sweptIntent
	byID    map[int64]*sweptIntent
	byRef   map[string]*sweptIntent
	byEvent map[string]*sweptIntent // intents of the swept channel only
	channel string
}

func newJoin(channel string, intents []*sweptIntent) *join {
	j := &join{byID: map[int64]*sweptIntent{}, byRef: map[string]*sweptIntent{}, byEvent: map[string]*sweptIntent{}, channel: channel}
	for _, in := range intents {
		j.add(in)
	}
	return j
}

// add takes in into the join, once.
func (j *join) add(in *sweptIntent) {
	if j.byID[in.id] != nil {
		return
	}
	j.intents = append(j.intents, in)
	j.byID[in.id] = in
	if in.ref != nil {
		j.byRef[*in.ref] = in
	}
	if in.channel == j.channel {
		j.byEvent[in.eventID] = in
	}
}

// byIdentity joins each object to its intent by the table's reference or by
// the metadata stamped on it, and returns those it cannot join. An object of
// another channel's intent is dropped: that channel's sweep reports it.
func (j *join) byIdentity(objects []effect.Object) []effect.Object {
	var rest []effect.Object
	for _, o := range objects {
		in := j.byRef[o.Ref]
		if in == nil && o.IntentID != "" {
			if id, err := strconv.ParseInt(o.IntentID, 10, 64); err == nil {
				if c := j.byID[id]; c != nil && c.eventID == o.EventID {
					in = c
				}
			}
		}
		if in == nil && o.IntentID == "" && o.EventID != "" {
			in = j.byEvent[o.EventID]
		}
		switch {
		case in == nil:
			rest = append(rest, o)
		case in.channel == j.channel:
			in.objects = append(in.objects, o)
		}
	}
	return rest
}

// better reports whether a is a likelier intent than b for an object joined
// by Match: one without an object yet, else the later created.
func better(a, b *sweptIntent) bool {
	if (len(a.objects) == 0) != (len(b.objects) == 0) {
		return len(a.objects) == 0
	}
	return a.created.After(b.created)
}

// byMatch joins each object that carries no metadata to an intent of the
// swept channel with the same Match created before it (allowing for skew):
// one without an object first, then the latest. It returns those it cannot join.
func (j *join) byMatch(objects []effect.Object) []effect.Object {
	var rest []effect.Object
	for _, o := range objects {
		var best *sweptIntent
		for _, in := range j.intents {
			if o.Match == "" || in.match != o.Match || in.channel != j.channel || in.created.After(o.Created.Add(sweepSkew)) {
				continue
			}
			if best == nil || better(in, best) {
				best = in
			}
		}
		if best == nil {
			rest = append(rest, o)
			continue
		}
		best.objects = append(best.objects, o)
	}
	return rest
}

// judge returns the findings about one intent and the objects joined to it.
func judge(in *sweptIntent, kind string, now time.Time) []effectdtype.Finding {
	var out []effectdtype.Finding
	f := effectdtype.Finding{IntentID: in.id, EventID: in.eventID, Status: in.status, ProviderRef: deref(in.ref), Objects: in.objects}
	if f.Objects == nil {
		f.Objects = []effect.Object{}
	}
	refs := func(os []effect.Object) string {
		s := make([]string, len(os))
		for i, o := range os {
			s[i] = o.Ref
		}
		return strings.Join(s, ", ")
	}
	if len(in.objects) > 1 {
		objs := slices.Clone(in.objects)
		slices.SortFunc(objs, func(a, b effect.Object) int { return a.Created.Compare(b.Created) })
		keep := objs[0]
		for _, o := range objs {
			if o.Ref == f.ProviderRef {
				keep = o
			}
		}
		extra := slices.DeleteFunc(objs, func(o effect.Object) bool { return o.Ref == keep.Ref })
		d := f
		d.Kind = effectdtype.FindingDuplicate
		d.Operation = fmt.Sprintf("the effect was applied %d times: keep %s and reverse %s at the provider (a refund, a cancel, a reversal; an SMS cannot be taken back)",
			len(in.objects), keep.Ref, refs(extra))
		out = append(out, d)
	}
	switch in.status {
	case statemachine.Sending, statemachine.InDoubt, statemachine.Failed, statemachine.Skipped, statemachine.Cancelled, statemachine.Pending:
		if u, ok := judgeNotSent(in, f, kind, now); ok {
			out = append(out, u)
		}
	case statemachine.Sent:
		if in.inWindow && in.listed && len(in.objects) == 0 {
			m := f
			what := cmp.Or(f.ProviderRef, "the intent's effect")
			if in.absent {
				m.Kind = effectdtype.FindingMissing
				m.Operation = fmt.Sprintf("the provider holds neither %s nor any effect carrying the intent's identity, whatever its time (deleted, reversed, or a wrong reference given to a resolve); SENT has no operator event, so if the effect is owed, enqueue it again under a new event id",
					what)
			} else {
				m.Kind = effectdtype.FindingUncertain
				m.Operation = fmt.Sprintf("the listing lacks %s, but %s, so the provider may hold it: look it up at the provider, and enqueue nothing again while it may hold it",
					what, in.unsure)
			}
			out = append(out, m)
		}
	}
	return out
}

// judgeNotSent is the finding of an intent not settled as sent (SENDING,
// IN_DOUBT, FAILED, SKIPPED, CANCELLED, PENDING): unsettled when the
// provider holds its effect, uncertain when it was claimed after the
// listing's end and its lookup proved nothing; none otherwise.
func judgeNotSent(in *sweptIntent, f effectdtype.Finding, kind string, now time.Time) (effectdtype.Finding, bool) {
	if in.status == statemachine.Sending && in.leaseLive {
		return f, false // a call in flight whose completion is coming
	}
	if len(in.objects) == 0 {
		if in.claimedLate && in.unsure != "" {
			m := f
			m.Kind = effectdtype.FindingUncertain
			m.Operation = fmt.Sprintf("it was claimed after the listing's end and %s, so the provider may hold its effect: look it up at the provider before settling or retrying it",
				in.unsure)
			return m, true
		}
		return f, false // nothing held
	}
	ref := in.objects[0].Ref
	for _, o := range in.objects {
		if o.Ref == f.ProviderRef {
			ref = o.Ref
		}
	}
	u := f
	u.Kind = effectdtype.FindingUnsettled
	withinKeyWindow := KeyWindow(kind) > 0 && !PastKeyWindow(kind, in.created, now)
	switch in.status {
	case statemachine.Sending, statemachine.InDoubt:
		u.Operation = fmt.Sprintf("effectd intents resolve %d --as sent --ref %s --reason %q", in.id, ref, "sweep: the provider holds "+ref)
	case statemachine.Pending:
		u.Operation = fmt.Sprintf("the provider holds %s from an earlier call of this intent, which waits to be sent again: do not enqueue it again; ", ref)
		if withinKeyWindow {
			u.Operation += fmt.Sprintf("within the provider's %s key window its next call repeats with the intent's key and the provider answers with %s, which settles it SENT", KeyWindow(kind), ref)
		} else {
			u.Operation += fmt.Sprintf("its next call would apply it again: effectd intents cancel %d --reason %q before it is claimed", in.id, "sweep: the provider holds "+ref)
		}
	default: // FAILED, SKIPPED, CANCELLED
		u.Operation = fmt.Sprintf("the provider holds %s although the intent is %s, and no operator event leads from %s to SENT: leave it %s and do not retry it, which would apply it again",
			ref, in.status, in.status, in.status)
		if withinKeyWindow && in.status != statemachine.Cancelled {
			u.Operation = fmt.Sprintf("effectd intents retry %d --reason %q: within the provider's %s key window the call repeats with the intent's key and the provider answers with %s instead of applying it again, which settles it SENT",
				in.id, "sweep: the provider holds "+ref, KeyWindow(kind), ref)
		}
	}
	return u, true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
