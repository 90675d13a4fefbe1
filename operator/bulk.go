package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/statemachine"
)

// Bulk limits.
const (
	MaxBulk      = 10_000           // intents one snapshot freezes at most
	BulkSample   = 20               // intents a snapshot shows
	bulkLifetime = 15 * time.Minute // how long a snapshot may be applied
	bulkKeep     = 24 * time.Hour   // how long an expired snapshot is kept before it is deleted
)

// bulkEvents maps a bulk action (and resolve's "as") to its operator event.
var bulkEvents = map[string]statemachine.Event{
	"retry":          statemachine.Requeue,
	"cancel":         statemachine.Cancel,
	"resolve:resend": statemachine.ResolveSend,
	"resolve:skip":   statemachine.ResolveSkip,
}

// bulkEvent returns the operator event of a bulk action.
func bulkEvent(action, as string) (statemachine.Event, error) {
	switch action {
	case "retry", "cancel":
		if as != "" {
			return "", fmt.Errorf("%w: as: only allowed when action is \"resolve\"", ErrInvalid)
		}
		return bulkEvents[action], nil
	case "resolve":
		if ev, ok := bulkEvents["resolve:"+as]; ok {
			return ev, nil
		}
		if as == "sent" {
			return "", fmt.Errorf("%w: as: \"sent\" needs each intent's own provider_ref: resolve those one by one", ErrInvalid)
		}
		return "", fmt.Errorf("%w: as: must be \"resend\" or \"skip\" in bulk, got %q", ErrInvalid, truncate(as, 40))
	}
	return "", fmt.Errorf("%w: action: must be \"retry\", \"cancel\" or \"resolve\", got %q", ErrInvalid, truncate(action, 40))
}

// bulkStates checks a bulk request and returns the states its snapshot may match.
func bulkStates(req effectdtype.BulkRequest) ([]string, error) {
	ev, err := bulkEvent(req.Action, req.As)
	if err != nil {
		return nil, err
	}
	if err := CheckReason(req.Reason, true); err != nil {
		return nil, err
	}
	var states []string
	for _, s := range statemachine.Sources(ev) {
		if req.Filter.Status == "" || string(s) == req.Filter.Status {
			states = append(states, string(s))
		}
	}
	if len(states) == 0 {
		return nil, fmt.Errorf("%w: filter.status: %s applies to %s, not %q", ErrInvalid,
			req.Action, joinStates(statemachine.Sources(ev)), truncate(req.Filter.Status, 40))
	}
	if len(req.Filter.EventIDPrefix) > 255 {
		return nil, fmt.Errorf("%w: filter.event_id_prefix: longer than 255 bytes", ErrInvalid)
	}
	for name, v := range map[string]string{"filter.channel": req.Filter.Channel, "filter.event_id_prefix": req.Filter.EventIDPrefix, "reason": req.Reason} {
		if !isText(v) {
			return nil, fmt.Errorf("%w: %s: must be UTF-8 text without NUL bytes", ErrInvalid, name)
		}
	}
	return states, nil
}

func joinStates(states []statemachine.State) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// frozenFilter is a snapshot's filter as stored: the request's filter and the
// channels the snapshot was frozen among (nil: every channel, as for an admin).
type frozenFilter struct {
	effectdtype.BulkFilter
	Channels []string `json:"channels"`
}

// within reports whether an actor who sees the channels sees admits (nil:
// every channel) sees every channel the snapshot's rows may be in, as they
// must to apply it: the filter's channel, else the channels it was frozen
// among. A snapshot frozen among no channel is its creator's alone.
func (f frozenFilter) within(actor string, sees func(string) bool, creator string) bool {
	channels := f.Channels
	switch {
	case f.Channel != "":
		channels = []string{f.Channel}
	case channels == nil:
		return sees == nil
	case len(channels) == 0:
		return actor == creator
	}
	for _, c := range channels {
		if !seen(sees, c) {
			return false
		}
	}
	return true
}

// seen reports whether sees admits channel; a nil sees admits every channel.
func seen(sees func(string) bool, channel string) bool { return sees == nil || sees(channel) }

// BulkFreeze asks FreezeBulk for a snapshot.
type BulkFreeze struct {
	Request effectdtype.BulkRequest
	Actor   string
	// Sees reports whether the actor sees a channel; nil: every channel.
	// The snapshot freezes only intents of the channels it admits.
	Sees func(channel string) bool
}

// FreezeBulk checks a bulk request and freezes the intents it matches (at
// most MaxBulk, by id, with their state now) in a snapshot that ApplyBulk
// may apply until it expires; it changes no intent. A filter on a channel
// the actor does not see is a ScopeError.
func (svc *Service) FreezeBulk(ctx context.Context, f BulkFreeze) (effectdtype.BulkSnapshot, error) {
	req := f.Request
	states, err := bulkStates(req)
	if err != nil {
		return effectdtype.BulkSnapshot{}, err
	}
	if req.Filter.Channel != "" && !seen(f.Sees, req.Filter.Channel) {
		return effectdtype.BulkSnapshot{}, ScopeError{What: fmt.Sprintf("channel %q", truncate(req.Filter.Channel, 64))}
	}
	var visible []string // nil: every channel
	if f.Sees != nil {
		names, err := svc.ChannelNames(ctx)
		if err != nil {
			return effectdtype.BulkSnapshot{}, fmt.Errorf("bulk %s: %w", req.Action, err)
		}
		visible = []string{} // not nil: an actor who sees no channel matches nothing
		for _, n := range names {
			if f.Sees(n) {
				visible = append(visible, n)
			}
		}
	}
	snap, err := svc.freeze(ctx, req, states, visible, f.Actor)
	if err != nil {
		return snap, fmt.Errorf("bulk %s: %w", req.Action, err)
	}
	return snap, nil
}

// freeze records the snapshot in one transaction; visible (unless nil) limits the channels.
func (svc *Service) freeze(ctx context.Context, req effectdtype.BulkRequest, states, visible []string, actor string) (snap effectdtype.BulkSnapshot, err error) {
	filter, err := json.Marshal(frozenFilter{BulkFilter: req.Filter, Channels: visible})
	if err != nil {
		return snap, err
	}
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return snap, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := intentdb.PruneBulk(ctx, tx, bulkKeep); err != nil {
		return snap, err
	}
	if snap.Snapshot, snap.ExpiresAt, err = intentdb.CreateBulk(ctx, tx, intentdb.NewBulk{Action: req.Action, As: req.As,
		Filter: filter, Reason: req.Reason, Actor: actor, Lifetime: bulkLifetime}); err != nil {
		return snap, err
	}
	n, err := intentdb.FreezeBulk(ctx, tx, intentdb.BulkFilter{Snapshot: snap.Snapshot, Limit: MaxBulk + 1, States: states,
		Channel: nullable(req.Filter.Channel), EventIDPrefix: nullable(req.Filter.EventIDPrefix), Channels: visible})
	if err != nil {
		return snap, err
	}
	snap.Matched, snap.More = int(n), n > MaxBulk
	if snap.More {
		if err := intentdb.DropBulkExtra(ctx, tx, snap.Snapshot); err != nil {
			return snap, err
		}
		snap.Matched = MaxBulk
	}
	if err := intentdb.SetBulkMatched(ctx, tx, snap.Snapshot, snap.Matched); err != nil {
		return snap, err
	}
	if snap.Sample, err = intentdb.SampleBulk(ctx, tx, snap.Snapshot, BulkSample); err != nil {
		return snap, err
	}
	return snap, tx.Commit(ctx)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// errSnapshotUsed refuses to apply a snapshot twice or after it expired.
var errSnapshotUsed = fmt.Errorf("%w: bulk snapshot", statemachine.ErrTransition)

// BulkApply asks ApplyBulk to apply a snapshot.
type BulkApply struct {
	Snapshot string // its id (CheckSnapshotID)
	Actor    string
	// Sees reports whether the actor sees a channel; nil: every channel.
	Sees   func(channel string) bool
	Logger *slog.Logger // where a row skipped for an unexpected error is logged; nil: slog.Default()
}

// AppliedBulk is what ApplyBulk did.
type AppliedBulk struct {
	effectdtype.BulkResult
	Action string             // the snapshot's action
	Event  statemachine.Event // its operator event; "" when no row was tried
}

// ApplyBulk applies a snapshot's action to each frozen intent that is still
// in the state it was frozen in, each row in its own fenced transaction
// (Operate), and counts the rest as skipped. A snapshot out of the actor's
// sight is a ScopeError, as a missing one is ErrNotFound, and stays
// applicable by its owner; one applied or expired is ErrTransition. Once
// every row was tried, the result carries the counts even with an error.
func (svc *Service) ApplyBulk(ctx context.Context, a BulkApply) (AppliedBulk, error) {
	id := a.Snapshot
	if err := CheckSnapshotID(id); err != nil {
		return AppliedBulk{}, err
	}
	st, err := svc.readSnapshot(ctx, id)
	if err == nil && !st.Filter.within(a.Actor, a.Sees, st.Actor) {
		err = ScopeError{What: "snapshot " + id}
	}
	if err != nil {
		return AppliedBulk{}, err
	}
	var out AppliedBulk
	claim, err := intentdb.ClaimBulk(ctx, svc.pool, id, a.Actor)
	if errors.Is(err, pgx.ErrNoRows) { // applied or expired since it was read
		if st, err = svc.readSnapshot(ctx, id); err == nil {
			err = st.whyNotApplicable(id)
		}
		return AppliedBulk{}, err
	}
	if err != nil {
		return AppliedBulk{}, fmt.Errorf("bulk apply %s: %w", id, err)
	}
	out.Action = claim.Action
	ev, err := bulkEvent(claim.Action, claim.As)
	if err != nil {
		return AppliedBulk{}, err
	}
	if out.BulkResult, err = svc.applyRows(ctx, a, ev, claim.Reason); err != nil {
		return AppliedBulk{}, fmt.Errorf("bulk apply %s: %w", id, err)
	}
	out.Event = ev
	if err := intentdb.FinishBulk(context.WithoutCancel(ctx), svc.pool, id, out.Applied, out.Skipped); err != nil {
		return out, fmt.Errorf("bulk apply %s: %w", id, err)
	}
	return out, nil
}

// applyRows applies ev to every row of the snapshot, as the store groups
// them (storage.Operator.ApplyBulk): a row at a time (applyOne), or a
// bucket's rows a batch at a time (applyBatch) in the distributed mode. A row
// that changed (or that fails on its own) is skipped and never stops the
// others.
func (svc *Service) applyRows(ctx context.Context, a BulkApply, ev statemachine.Event, reason string) (res effectdtype.BulkResult, err error) {
	_, checkErr := (Operation{Event: ev, Actor: a.Actor, Reason: reason}).check()
	one := func(f intentdb.FrozenRow) error { return svc.applyOne(ctx, a, ev, reason, f, &res) }
	batch := func(bucket int64, rows []intentdb.FrozenRow) error {
		if checkErr != nil {
			return checkErr // each row is refused on its own
		}
		applied, err := svc.applyBatch(ctx, a, ev, reason, bucket, rows)
		if err != nil {
			cmp.Or(a.Logger, slog.Default()).WarnContext(ctx, "bulk apply: a bucket's batch failed, applied row by row", "snapshot", a.Snapshot, "bucket", bucket, "err", err)
			return err
		}
		res.Applied += applied
		res.Skipped += len(rows) - applied
		return nil
	}
	return res, svc.store.ApplyBulk(ctx, svc.pool, a.Snapshot, one, batch)
}

// applyOne applies ev to frozen row f in its own transaction (Operate) and
// counts it in res, applied or skipped; it fails only when ctx is done.
func (svc *Service) applyOne(ctx context.Context, a BulkApply, ev statemachine.Event, reason string, f intentdb.FrozenRow, res *effectdtype.BulkResult) error {
	if !seen(a.Sees, f.Channel) { // gone (channel ""): nothing left to act on
		res.Skipped++
		return nil
	}
	_, _, err := svc.Operate(ctx, Operation{IntentID: f.ID, Event: ev, Actor: a.Actor,
		Reason: reason, Snapshot: a.Snapshot, Expect: &Expected{Status: f.Status, Attempts: f.Attempts, Key: f.Key}})
	switch {
	case err == nil:
		res.Applied++
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		if !errors.Is(err, statemachine.ErrTransition) && !errors.Is(err, ErrNotFound) {
			cmp.Or(a.Logger, slog.Default()).WarnContext(ctx, "bulk apply: row skipped", "snapshot", a.Snapshot, "intent_id", f.ID, "err", err)
		}
		res.Skipped++
	}
	return nil
}

// snapshotState is a stored snapshot as ApplyBulk checks it.
type snapshotState struct {
	Actor     string
	Filter    frozenFilter
	AppliedAt *time.Time
	ExpiresAt time.Time
}

// readSnapshot reads snapshot id; ErrNotFound when there is none.
func (svc *Service) readSnapshot(ctx context.Context, id string) (st snapshotState, err error) {
	row, err := intentdb.SelectBulk(ctx, svc.pool, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	case err != nil:
		return st, fmt.Errorf("bulk snapshot %s: %w", id, err)
	}
	st.Actor, st.AppliedAt, st.ExpiresAt = row.Actor, row.AppliedAt, row.ExpiresAt
	if err := json.Unmarshal(row.Filter, &st.Filter); err != nil {
		return st, fmt.Errorf("bulk snapshot %s: filter: %w", id, err)
	}
	return st, nil
}

// whyNotApplicable explains why snapshot id could not be claimed.
func (st snapshotState) whyNotApplicable(id string) error {
	if st.AppliedAt != nil {
		return fmt.Errorf("%w %s was already applied at %s", errSnapshotUsed, id, st.AppliedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w %s expired at %s: take a new one", errSnapshotUsed, id, st.ExpiresAt.UTC().Format(time.RFC3339))
}

// CheckSnapshotID refuses, as ErrNotFound, an id that no snapshot can have:
// every snapshot's is a UUID in its canonical text form.
func CheckSnapshotID(id string) error {
	if !uuidText(id) {
		return fmt.Errorf("%w: snapshot %q", ErrNotFound, truncate(id, 40))
	}
	return nil
}

// uuidText reports whether s is a UUID in its canonical text form.
func uuidText(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}
