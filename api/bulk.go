package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// Bulk limits.
const (
	maxBulk      = 10_000           // intents one snapshot freezes at most
	bulkSample   = 20               // intents a snapshot answer shows
	bulkLifetime = 15 * time.Minute // how long a snapshot may be applied
	bulkKeep     = 24 * time.Hour   // how long an expired snapshot is kept before it is deleted
)

// bulkFilter selects the intents of a bulk action.
type bulkFilter struct {
	Status        string `json:"status,omitempty"`
	Channel       string `json:"channel,omitempty"`
	EventIDPrefix string `json:"event_id_prefix,omitempty"`
}

// frozenFilter is a snapshot's filter as stored: the request's filter and the
// channels the snapshot was frozen among (nil: every channel, as for an admin).
type frozenFilter struct {
	bulkFilter
	Channels []string `json:"channels"`
}

// within reports whether p sees every channel the snapshot's rows may be in,
// as it must to apply it: the filter's channel, else the channels it was
// frozen among. A snapshot frozen among no channel is its creator's alone.
func (f frozenFilter) within(p Principal, creator string) bool {
	channels := f.Channels
	switch {
	case f.Channel != "":
		channels = []string{f.Channel}
	case channels == nil:
		return !p.scoped()
	case len(channels) == 0:
		return p.Name == creator
	}
	for _, c := range channels {
		if !p.CanSee(c) {
			return false
		}
	}
	return true
}

// bulkRequest is the body of POST /v1/intents/bulk.
type bulkRequest struct {
	Action string     `json:"action"` // retry | cancel | resolve
	Filter bulkFilter `json:"filter"`
	As     string     `json:"as"`     // with resolve: resend | skip
	Reason string     `json:"reason"` // required
}

// bulkSnapshot is the answer of POST /v1/intents/bulk.
type bulkSnapshot struct {
	Snapshot  string                 `json:"snapshot"`
	Matched   int                    `json:"matched"`
	More      bool                   `json:"more"` // more than the limit matched: only the first (by id) were frozen
	ExpiresAt time.Time              `json:"expires_at"`
	Sample    []dispatcher.IntentRow `json:"sample"`
}

// bulkResult is the answer of POST /v1/intents/bulk/{snapshot}/apply.
type bulkResult struct {
	Applied int `json:"applied"`
	Skipped int `json:"skipped"` // changed since the snapshot, or gone
}

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
			return "", fmt.Errorf("%w: as: only allowed when action is \"resolve\"", dispatcher.ErrInvalid)
		}
		return bulkEvents[action], nil
	case "resolve":
		if ev, ok := bulkEvents["resolve:"+as]; ok {
			return ev, nil
		}
		if as == "sent" {
			return "", fmt.Errorf("%w: as: \"sent\" needs each intent's own provider_ref: resolve those one by one", dispatcher.ErrInvalid)
		}
		return "", fmt.Errorf("%w: as: must be \"resend\" or \"skip\" in bulk, got %q", dispatcher.ErrInvalid, truncate(as, 40))
	}
	return "", fmt.Errorf("%w: action: must be \"retry\", \"cancel\" or \"resolve\", got %q", dispatcher.ErrInvalid, truncate(action, 40))
}

// parseBulk decodes and checks a bulk request; it returns the operator event
// and the states the snapshot may match.
func parseBulk(body []byte) (bulkRequest, statemachine.Event, []string, error) {
	var req bulkRequest
	if err := decodeObject(body, &req); err != nil {
		return req, "", nil, err
	}
	ev, err := bulkEvent(req.Action, req.As)
	if err != nil {
		return req, "", nil, err
	}
	if err := checkReason(req.Reason, true); err != nil {
		return req, "", nil, err
	}
	var states []string
	for _, s := range statemachine.Sources(ev) {
		if req.Filter.Status == "" || string(s) == req.Filter.Status {
			states = append(states, string(s))
		}
	}
	if len(states) == 0 {
		return req, "", nil, fmt.Errorf("%w: filter.status: %s applies to %s, not %q", dispatcher.ErrInvalid,
			req.Action, joinStates(statemachine.Sources(ev)), truncate(req.Filter.Status, 40))
	}
	if len(req.Filter.EventIDPrefix) > 255 {
		return req, "", nil, fmt.Errorf("%w: filter.event_id_prefix: longer than 255 bytes", dispatcher.ErrInvalid)
	}
	for name, v := range map[string]string{"filter.channel": req.Filter.Channel, "filter.event_id_prefix": req.Filter.EventIDPrefix, "reason": req.Reason} {
		if !validText(v) {
			return req, "", nil, fmt.Errorf("%w: %s: must be UTF-8 text without NUL bytes", dispatcher.ErrInvalid, name)
		}
	}
	return req, ev, states, nil
}

// checkReason refuses a reason over 1000 bytes, or an empty one when required.
func checkReason(reason string, required bool) error {
	switch {
	case required && strings.TrimSpace(reason) == "":
		return fmt.Errorf("%w: reason: required (1 to %d bytes): say why, for the audit", dispatcher.ErrInvalid, maxReason)
	case len(reason) > maxReason:
		return fmt.Errorf("%w: reason: longer than %d bytes", dispatcher.ErrInvalid, maxReason)
	}
	return nil
}

func joinStates(states []statemachine.State) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// createBulk answers POST /v1/intents/bulk: freezes the matching intents in a
// snapshot and answers how many and a sample, changing no intent.
func (h *handler) createBulk(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req, _, states, err := parseBulk(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := principalOf(r)
	if req.Filter.Channel != "" && !p.CanSee(req.Filter.Channel) {
		h.fail(w, r, hidden{fmt.Sprintf("channel %q", truncate(req.Filter.Channel, 64))})
		return
	}
	visible, err := h.visibleChannels(r.Context(), p)
	if err != nil {
		h.fail(w, r, fmt.Errorf("bulk %s: %w", req.Action, err))
		return
	}
	snap, err := h.freeze(r.Context(), req, states, visible, p.Name)
	if err != nil {
		h.fail(w, r, fmt.Errorf("bulk %s: %w", req.Action, err))
		return
	}
	h.log.InfoContext(r.Context(), "bulk snapshot", "snapshot", snap.Snapshot, "action", req.Action,
		"matched", snap.Matched, "actor", principalOf(r).Name)
	writeJSON(w, http.StatusOK, snap)
}

// visibleChannels returns the channels p may see, or nil when p sees every channel.
func (h *handler) visibleChannels(ctx context.Context, p Principal) ([]string, error) {
	if !p.scoped() {
		return nil, nil
	}
	rows, _ := h.pool.Query(ctx, query.ChannelNames)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	visible := []string{} // not nil: a principal that sees no channel matches nothing
	for _, n := range names {
		if p.CanSee(n) {
			visible = append(visible, n)
		}
	}
	return visible, nil
}

// freeze records the snapshot in one transaction; visible (unless nil) limits the channels.
func (h *handler) freeze(ctx context.Context, req bulkRequest, states, visible []string, actor string) (snap bulkSnapshot, err error) {
	filter, err := json.Marshal(frozenFilter{bulkFilter: req.Filter, Channels: visible})
	if err != nil {
		return snap, err
	}
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return snap, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, query.BulkPrune, bulkKeep.String()); err != nil {
		return snap, err
	}
	if err := tx.QueryRow(ctx, query.BulkCreate, req.Action, req.As, filter, req.Reason, actor, bulkLifetime.String()).
		Scan(&snap.Snapshot, &snap.ExpiresAt); err != nil {
		return snap, err
	}
	n, err := query.FreezeBulk(ctx, tx, query.BulkFilter{Snapshot: snap.Snapshot, Limit: maxBulk + 1, States: states,
		Channel: nullable(req.Filter.Channel), EventIDPrefix: nullable(req.Filter.EventIDPrefix), Channels: visible})
	if err != nil {
		return snap, err
	}
	snap.Matched, snap.More = int(n), n > maxBulk
	if snap.More {
		if _, err := tx.Exec(ctx, query.BulkDropExtra, snap.Snapshot); err != nil {
			return snap, err
		}
		snap.Matched = maxBulk
	}
	if _, err := tx.Exec(ctx, query.BulkSetMatched, snap.Snapshot, snap.Matched); err != nil {
		return snap, err
	}
	rows, _ := tx.Query(ctx, query.BulkSample, snap.Snapshot, bulkSample)
	if snap.Sample, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (dispatcher.IntentRow, error) {
		return dispatcher.ScanIntent(row)
	}); err != nil {
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

// applyBulk answers POST /v1/intents/bulk/{snapshot}/apply: applies the
// snapshot's action to each frozen intent that is still in the state it was
// frozen in, each row in its own fenced transaction, and counts the rest as
// skipped. A snapshot out of the caller's scope answers as a missing one does
// and stays applicable by its owner.
func (h *handler) applyBulk(w http.ResponseWriter, r *http.Request) {
	ctx, id, p := r.Context(), chi.URLParam(r, "snapshot"), principalOf(r)
	actor := p.Name
	if !validUUID(id) {
		h.fail(w, r, fmt.Errorf("%w: snapshot %q", dispatcher.ErrNotFound, truncate(id, 40)))
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := parseReason(body); err != nil { // an empty body or {} is all apply takes
		h.fail(w, r, err)
		return
	}
	st, err := h.snapshotState(ctx, id)
	if err == nil && !st.Filter.within(p, st.Actor) {
		err = hidden{"snapshot " + id}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var action, as, reason string
	err = h.pool.QueryRow(ctx, query.BulkClaim, id, actor).Scan(&action, &as, &reason)
	if errors.Is(err, pgx.ErrNoRows) { // applied or expired since it was read
		if st, err = h.snapshotState(ctx, id); err == nil {
			err = st.whyNotApplicable(id)
		}
		h.fail(w, r, err)
		return
	}
	if err != nil {
		h.fail(w, r, fmt.Errorf("bulk apply %s: %w", id, err))
		return
	}
	ev, err := bulkEvent(action, as)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.applyRows(ctx, id, ev, p, reason)
	if err != nil {
		h.fail(w, r, fmt.Errorf("bulk apply %s: %w", id, err))
		return
	}
	h.log.InfoContext(ctx, "bulk applied", "snapshot", id, "action", action, "applied", res.Applied,
		"skipped", res.Skipped, "actor", actor)
	writeJSON(w, http.StatusOK, res)
}

// applyRows applies ev to every row of the snapshot; a row that changed (or
// that fails on its own) is skipped and never stops the others.
func (h *handler) applyRows(ctx context.Context, id string, ev statemachine.Event, p Principal, reason string) (res bulkResult, err error) {
	type frozen struct {
		ID       int64
		Status   statemachine.State
		Attempts int
		Channel  string
	}
	rows, _ := h.pool.Query(ctx, query.BulkRows, id)
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[frozen])
	if err != nil {
		return res, err
	}
	for _, f := range list {
		if !p.CanSee(f.Channel) { // gone (channel ""): nothing left to act on
			res.Skipped++
			continue
		}
		_, _, err := dispatcher.Operate(ctx, h.pool, dispatcher.Operation{IntentID: f.ID, Event: ev, Actor: p.Name,
			Reason: reason, Snapshot: id, Expect: &dispatcher.Expected{Status: f.Status, Attempts: f.Attempts}})
		switch {
		case err == nil:
			res.Applied++
		case ctx.Err() != nil:
			return res, ctx.Err()
		default:
			if !errors.Is(err, statemachine.ErrTransition) && !errors.Is(err, dispatcher.ErrNotFound) {
				h.log.WarnContext(ctx, "bulk apply: row skipped", "snapshot", id, "intent_id", f.ID, "err", err)
			}
			res.Skipped++
		}
	}
	h.bulkRows.WithLabelValues(string(ev), "applied").Add(float64(res.Applied))
	h.bulkRows.WithLabelValues(string(ev), "skipped").Add(float64(res.Skipped))
	_, err = h.pool.Exec(context.WithoutCancel(ctx), query.BulkFinish, id, res.Applied, res.Skipped)
	return res, err
}

// snapshotState is a stored snapshot as apply checks it.
type snapshotState struct {
	Actor     string
	Filter    frozenFilter
	AppliedAt *time.Time
	ExpiresAt time.Time
}

// snapshotState reads snapshot id; ErrNotFound when there is none.
func (h *handler) snapshotState(ctx context.Context, id string) (st snapshotState, err error) {
	var filter []byte
	err = h.pool.QueryRow(ctx, query.BulkState, id).Scan(&st.Actor, &filter, &st.AppliedAt, &st.ExpiresAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, fmt.Errorf("snapshot %s: %w", id, dispatcher.ErrNotFound)
	case err != nil:
		return st, fmt.Errorf("bulk snapshot %s: %w", id, err)
	}
	if err := json.Unmarshal(filter, &st.Filter); err != nil {
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

// validUUID reports whether s is a UUID in its canonical text form.
func validUUID(s string) bool {
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
