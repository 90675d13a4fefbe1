package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// createBulk answers POST /v1/intents/bulk: freezes the matching intents of
// the channels the caller sees in a snapshot and answers how many and a
// sample, changing no intent. The sample is masked as the intents list masks
// it for the caller (scope.intent): the channels' redacted fields, in the
// payload and wherever last_error quotes them.
func (h *handler) createBulk(w http.ResponseWriter, r *http.Request) (effectdtype.BulkSnapshot, error) {
	body, err := readBody(w, r)
	if err != nil {
		return effectdtype.BulkSnapshot{}, err
	}
	var req effectdtype.BulkRequest
	if err := decodeObject(body, &req); err != nil {
		return effectdtype.BulkSnapshot{}, err
	}
	p := principalOf(r)
	sc, err := h.scopeOf(r.Context(), p)
	if err != nil {
		return effectdtype.BulkSnapshot{}, err
	}
	snap, err := h.svc.FreezeBulk(r.Context(), operator.BulkFreeze{Request: req, Actor: p.Name, Sees: p.sees()})
	if err != nil {
		return snap, err
	}
	for i, row := range snap.Sample {
		snap.Sample[i] = sc.intent(row)
	}
	h.log.InfoContext(r.Context(), "bulk snapshot", "snapshot", snap.Snapshot, "action", req.Action,
		"matched", snap.Matched, "actor", p.Name)
	return snap, nil
}

// applyBulk answers POST /v1/intents/bulk/{snapshot}/apply: applies the
// snapshot's action to each frozen intent still in the state it was frozen
// in and counts the rest as skipped. A snapshot out of the caller's scope
// answers as a missing one does and stays applicable by its owner.
func (h *handler) applyBulk(w http.ResponseWriter, r *http.Request) (effectdtype.BulkResult, error) {
	ctx, id, p := r.Context(), chi.URLParam(r, "snapshot"), principalOf(r)
	var none effectdtype.BulkResult
	if err := operator.CheckSnapshotID(id); err != nil { // before the body is read
		return none, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return none, err
	}
	reason, err := parseReason(body) // an empty body or {} is all apply takes, but on a two-person channel
	if err != nil {
		return none, err
	}
	need, err := h.svc.BulkApproval(ctx, id, p.sees())
	if err != nil {
		return none, err
	}
	if need != nil { // a two-person channel: a request instead
		if !p.CanSee(need.Channel) {
			return none, hidden{What: "snapshot " + id}
		}
		a, err := h.svc.RequestBulk(ctx, *need, p.Name, reason)
		if err != nil {
			return none, err
		}
		return none, h.requested(r, a)
	}
	res, err := h.svc.ApplyBulk(ctx, operator.BulkApply{Snapshot: id, Actor: p.Name, Sees: p.sees(), Logger: h.log})
	if res.Event != "" {
		h.bulkRows.WithLabelValues(string(res.Event), "applied").Add(float64(res.Applied))
		h.bulkRows.WithLabelValues(string(res.Event), "skipped").Add(float64(res.Skipped))
	}
	if err != nil {
		return none, err
	}
	h.log.InfoContext(ctx, "bulk applied", "snapshot", id, "action", res.Action, "applied", res.Applied,
		"skipped", res.Skipped, "actor", p.Name)
	return res.BulkResult, nil
}
