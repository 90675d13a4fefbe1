package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// Bounds of GET /v1/intents: a page holds defaultLimit intents unless the
// caller asks for up to maxLimit (and ends early at operator.MaxPageBytes).
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// listIntents answers GET /v1/intents, paginated by id.
func (h *handler) listIntents(_ http.ResponseWriter, r *http.Request) (effectdtype.IntentPage, error) {
	var page effectdtype.IntentPage
	q := r.URL.Query()
	var status, channel, eventID *string
	if s := q.Get("status"); s != "" {
		if !statemachine.State(s).Valid() {
			return page, fmt.Errorf("%w: status: must be one of %s, got %q", dispatcher.ErrInvalid, stateList(), truncate(s, 40))
		}
		status = &s
	}
	if s := q.Get("channel"); s != "" {
		channel = &s
	}
	if s := q.Get("event_id"); s != "" {
		eventID = &s
	}
	f, err := parseListFilter(q)
	if err != nil {
		return page, err
	}
	f.Status, f.Channel, f.EventID = status, channel, eventID
	if f.Limit, f.After, err = queryPage(r); err != nil {
		return page, err
	}
	sc, err := h.scopeOf(r.Context(), principalOf(r))
	if err != nil {
		return page, err
	}
	f.Channels = sc.visible
	if page, err = h.svc.ListIntents(r.Context(), f); err != nil {
		return page, fmt.Errorf("list intents: %w", err)
	}
	for i, it := range page.Intents {
		page.Intents[i] = sc.intent(it)
	}
	return page, nil
}

// parseListFilter reads the rest of GET /v1/intents' filters: delivery, a
// search that matches an event id, idempotency key or provider reference
// exactly, and a range of created_at [since, until).
func parseListFilter(q url.Values) (f effectdtype.IntentFilter, err error) {
	if s := q.Get("delivery"); s != "" {
		if d := statemachine.Delivery(s); !d.Valid() {
			return f, fmt.Errorf("%w: delivery: must be one of %s, got %q", dispatcher.ErrInvalid, deliveryList(), truncate(s, 40))
		}
		f.Delivery = &s
	}
	if s := strings.TrimSpace(q.Get("q")); s != "" {
		f.Search = &s
	}
	for name, dst := range map[string]**time.Time{"since": &f.Since, "until": &f.Until} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil || t.Year() < 1 || t.Year() > 9999 {
				return f, fmt.Errorf("%w: %s: must be an RFC 3339 time such as 2026-11-30T12:00:00Z, got %q", dispatcher.ErrInvalid, name, truncate(s, 40))
			}
			*dst = &t
		}
	}
	return f, nil
}

// deliveryList names the known deliveries, in order of progress.
func deliveryList() string {
	var s []string
	for _, d := range statemachine.Deliveries {
		if d.Valid() {
			s = append(s, string(d))
		}
	}
	return strings.Join(s, ", ")
}

func stateList() string {
	s := make([]string, len(statemachine.States))
	for i, x := range statemachine.States {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// getIntent answers GET /v1/intents/{id} with the intent, its attempts and its audit entries.
func (h *handler) getIntent(_ http.ResponseWriter, r *http.Request) (effectdtype.IntentDetail, error) {
	id, err := pathID(r)
	if err != nil {
		return effectdtype.IntentDetail{}, err
	}
	p := principalOf(r)
	d, err := h.svc.IntentDetail(r.Context(), id)
	if err == nil && !p.CanSee(d.Intent.Channel) {
		err = hidden{What: fmt.Sprintf("get intent %d", id)}
	}
	if err != nil {
		return effectdtype.IntentDetail{}, err
	}
	sc, err := h.scopeOf(r.Context(), p)
	if err != nil {
		return effectdtype.IntentDetail{}, err
	}
	return sc.detail(d), nil
}

// retryIntent answers POST /v1/intents/{id}/retry: FAILED, SKIPPED or IN_DOUBT back to PENDING.
func (h *handler) retryIntent(w http.ResponseWriter, r *http.Request) (effectdtype.IntentRow, error) {
	return h.operate(w, r, func(body []byte) (operator.Operation, error) {
		req, err := parseRetry(body)
		return operator.Operation{Event: statemachine.Requeue, Reason: req.Reason, Force: req.Force}, err
	})
}

// cancelIntent answers POST /v1/intents/{id}/cancel: PENDING to CANCELLED.
func (h *handler) cancelIntent(w http.ResponseWriter, r *http.Request) (effectdtype.IntentRow, error) {
	return h.operate(w, r, func(body []byte) (operator.Operation, error) {
		reason, err := parseReason(body)
		return operator.Operation{Event: statemachine.Cancel, Reason: reason}, err
	})
}

// resolveIntent answers POST /v1/intents/{id}/resolve: settles an IN_DOUBT or stuck SENDING intent.
func (h *handler) resolveIntent(w http.ResponseWriter, r *http.Request) (effectdtype.IntentRow, error) {
	return h.operate(w, r, func(body []byte) (operator.Operation, error) {
		ev, req, err := parseResolve(body)
		return operator.Operation{Event: ev, ProviderRef: req.ProviderRef, Reason: req.Reason, Force: req.Force}, err
	})
}

// operate applies the operator event that parse reads from the body, and
// answers with the intent as it is afterwards.
func (h *handler) operate(w http.ResponseWriter, r *http.Request, parse func(body []byte) (operator.Operation, error)) (effectdtype.IntentRow, error) {
	var none effectdtype.IntentRow
	id, err := pathID(r)
	if err != nil {
		return none, err
	}
	p := principalOf(r)
	if err := h.authorizeIntent(r.Context(), p, id, ActionOperate); err != nil {
		return none, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return none, err
	}
	op, err := parse(body)
	if err != nil {
		return none, err
	}
	op.IntentID, op.Actor = id, p.Name
	if op.EventID, err = shownEvent(r); err != nil {
		return none, err
	}
	before, after, err := h.svc.Operate(r.Context(), op)
	if errors.Is(err, operator.ErrApprovalRequired) { // a two-person channel: a request instead
		a, err := h.svc.RequestOperation(r.Context(), op)
		if err != nil {
			return none, err
		}
		return none, h.requested(r, a)
	}
	if err != nil {
		return none, err
	}
	h.log.DebugContext(r.Context(), "intent state change", "intent_id", id, "channel", after.Channel,
		"event", op.Event, "from", before.Status, "to", after.Status, "actor", op.Actor)
	sc, err := h.scopeOf(r.Context(), p)
	if err != nil {
		return none, err
	}
	return sc.intent(after), nil
}

// shownEvent reads ?event_id=, the producer's event id the operator was shown
// for the intent: the operation then acts only while the intent's id still
// names that event (operator.Operation.EventID). "" when absent.
func shownEvent(r *http.Request) (string, error) {
	e := r.URL.Query().Get("event_id")
	if len(e) > 255 || !utf8.ValidString(e) || strings.ContainsRune(e, 0) {
		return "", fmt.Errorf("%w: event_id: must be the intent's event id, 1 to 255 bytes of UTF-8 without NUL", dispatcher.ErrInvalid)
	}
	return e, nil
}

// reconcileIntent answers POST /v1/intents/{id}/reconcile: asks the provider now;
// with ?dry_run=true it reports the settlement without applying it.
func (h *handler) reconcileIntent(_ http.ResponseWriter, r *http.Request) (s effectdtype.ReconcileResult, err error) {
	id, err := pathID(r)
	if err != nil {
		return s, err
	}
	if err := h.authorizeIntent(r.Context(), principalOf(r), id, ActionOperate); err != nil {
		return s, err
	}
	dryRun, err := queryBool(r, "dry_run")
	if err != nil {
		return s, err
	}
	if h.reconciler == nil {
		return s, fmt.Errorf("%w: no reconciler runs in this process", errUnavailable)
	}
	if s, err = h.reconciler.Reconcile(r.Context(), id, dryRun, principalOf(r).Name); err != nil {
		return s, fmt.Errorf("reconcile intent %d: %w", id, err)
	}
	if s.Applied {
		h.log.DebugContext(r.Context(), "intent state change", "intent_id", id, "event", "reconcile",
			"from", s.From, "to", s.To, "outcome", s.Outcome, "actor", principalOf(r).Name)
	}
	return s, nil
}
