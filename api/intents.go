package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// Bounds of GET /v1/intents and GET /v1/intents/{id}: a page ends early,
// with next set, once its rows reach maxPageBytes (payloads can be up to
// 1 MiB each), and one intent shows its newest maxDetailRows attempts and
// audit entries.
const (
	defaultLimit  = 100
	maxLimit      = 1000
	maxPageBytes  = 4 << 20
	maxDetailRows = 200
)

// intentPage is the response of GET /v1/intents.
type intentPage struct {
	Intents []dispatcher.IntentRow `json:"intents"`
	Next    *int64                 `json:"next"` // pass as ?after= for the next page; null on the last page
}

// Attempt is one row of effectd.attempts: a provider call, lookup, callback or
// operator action on an intent, as the API shows it.
type Attempt struct {
	ID          int64      `json:"id"`
	Attempt     int        `json:"attempt"`
	Kind        string     `json:"kind"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Outcome     string     `json:"outcome"`
	Error       *string    `json:"error"`
	ProviderRef *string    `json:"provider_ref"`
}

// AuditEntry is one row of effectd.audit: a change made through the API.
// Before and After are stored as written: in the shape of query.AuditState
// (and after also why it changed), or as earlier versions wrote them.
type AuditEntry struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Reason *string         `json:"reason"` // why, as the operator gave it
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// intentDetail is the response of GET /v1/intents/{id}.
type intentDetail struct {
	Intent   dispatcher.IntentRow `json:"intent"`
	Attempts []Attempt            `json:"attempts"`
	Audit    []AuditEntry         `json:"audit"`
	// Set when older attempts or audit entries exist than those shown.
	AttemptsTruncated bool `json:"attempts_truncated,omitempty"`
	AuditTruncated    bool `json:"audit_truncated,omitempty"`
}

// listIntents answers GET /v1/intents, paginated by id.
func (h *handler) listIntents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var status, channel, eventID *string
	if s := q.Get("status"); s != "" {
		if !statemachine.State(s).Valid() {
			h.fail(w, r, fmt.Errorf("%w: status: must be one of %s, got %q", dispatcher.ErrInvalid, stateList(), truncate(s, 40)))
			return
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
		h.fail(w, r, err)
		return
	}
	limit, after, err := queryPage(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sc, err := h.scopeOf(r.Context(), principalOf(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.intentPage(r.Context(), sc, limit, after, status, channel, eventID, f)
	if err != nil {
		h.fail(w, r, fmt.Errorf("list intents: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// intentPage reads up to limit intents after the id after, of the channels
// sc sees and as sc may see them, fewer when they reach maxPageBytes; it stops
// reading at the first row it will not show.
func (h *handler) intentPage(ctx context.Context, sc scope, limit, after int64, status, channel, eventID *string, f listFilter) (intentPage, error) {
	page := intentPage{Intents: []dispatcher.IntentRow{}}
	rows, err := query.ListIntents(ctx, h.pool, query.IntentFilter{After: after, Limit: limit + 1, Status: status, Channel: channel,
		EventID: eventID, Delivery: f.delivery, Search: f.q, Since: f.since, Until: f.until, Channels: sc.visible})
	if err != nil {
		return page, err
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		it, err := dispatcher.ScanIntent(rows)
		if err != nil {
			return page, err
		}
		n := rowBytes(it)
		if int64(len(page.Intents)) == limit || (len(page.Intents) > 0 && size+n > maxPageBytes) {
			next := page.Intents[len(page.Intents)-1].ID
			page.Next = &next
			break
		}
		page.Intents = append(page.Intents, sc.intent(it))
		size += n
	}
	return page, rows.Err()
}

// rowBytes estimates the size of it in a response.
func rowBytes(it dispatcher.IntentRow) int {
	n := 512 + len(it.Payload) + len(it.EventID) + len(it.IdempotencyKey)
	for _, s := range []*string{it.ProviderRef, it.LastError, it.OrderingKey} {
		if s != nil {
			n += len(*s)
		}
	}
	return n
}

// listFilter is the rest of GET /v1/intents' filters: delivery, a search
// that matches an event id, idempotency key or provider reference exactly,
// and a range of created_at [since, until).
type listFilter struct {
	delivery, q  *string
	since, until *time.Time
}

// deliveries are the values of effectd.intents.delivery.
var deliveries = []string{"accepted", "delivered", "undelivered"}

func parseListFilter(q url.Values) (f listFilter, err error) {
	if s := q.Get("delivery"); s != "" {
		if !slices.Contains(deliveries, s) {
			return f, fmt.Errorf("%w: delivery: must be one of %s, got %q", dispatcher.ErrInvalid, strings.Join(deliveries, ", "), truncate(s, 40))
		}
		f.delivery = &s
	}
	if s := strings.TrimSpace(q.Get("q")); s != "" {
		f.q = &s
	}
	for name, dst := range map[string]**time.Time{"since": &f.since, "until": &f.until} {
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

func stateList() string {
	s := make([]string, len(statemachine.States))
	for i, x := range statemachine.States {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// getIntent answers GET /v1/intents/{id} with the intent, its attempts and its audit entries.
func (h *handler) getIntent(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := principalOf(r)
	d, err := h.intentDetail(r.Context(), id)
	if err == nil && !p.CanSee(d.Intent.Channel) {
		err = hidden{fmt.Sprintf("get intent %d", id)}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sc, err := h.scopeOf(r.Context(), p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sc.detail(d))
}

func (h *handler) intentDetail(ctx context.Context, id int64) (d intentDetail, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("get intent %d: %w", id, err)
		}
	}()
	// One snapshot, so the intent, its attempts and its audit agree.
	tx, err := h.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return d, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	d.Intent, err = dispatcher.ScanIntent(tx.QueryRow(ctx, query.SelectIntent, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, dispatcher.ErrNotFound
	}
	if err != nil {
		return d, err
	}
	rows, _ := tx.Query(ctx, query.ListAttempts, id, maxDetailRows+1)
	if d.Attempts, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Attempt]); err != nil {
		return d, err
	}
	rows, _ = tx.Query(ctx, query.ListAudit, id, maxDetailRows+1)
	if d.Audit, err = pgx.CollectRows(rows, pgx.RowToStructByPos[AuditEntry]); err != nil {
		return d, err
	}
	// One row past the bound was read to know that older ones exist.
	if len(d.Attempts) > maxDetailRows {
		d.Attempts, d.AttemptsTruncated = d.Attempts[1:], true
	}
	if len(d.Audit) > maxDetailRows {
		d.Audit, d.AuditTruncated = d.Audit[1:], true
	}
	return d, nil
}

// retryIntent answers POST /v1/intents/{id}/retry: FAILED, SKIPPED or IN_DOUBT back to PENDING.
func (h *handler) retryIntent(w http.ResponseWriter, r *http.Request) {
	h.operate(w, r, func(body []byte) (dispatcher.Operation, error) {
		req, err := parseRetry(body)
		return dispatcher.Operation{Event: statemachine.Requeue, Reason: req.Reason, Force: req.Force}, err
	})
}

// cancelIntent answers POST /v1/intents/{id}/cancel: PENDING to CANCELLED.
func (h *handler) cancelIntent(w http.ResponseWriter, r *http.Request) {
	h.operate(w, r, func(body []byte) (dispatcher.Operation, error) {
		reason, err := parseReason(body)
		return dispatcher.Operation{Event: statemachine.Cancel, Reason: reason}, err
	})
}

// resolveIntent answers POST /v1/intents/{id}/resolve: settles an IN_DOUBT or stuck SENDING intent.
func (h *handler) resolveIntent(w http.ResponseWriter, r *http.Request) {
	h.operate(w, r, func(body []byte) (dispatcher.Operation, error) {
		ev, req, err := parseResolve(body)
		return dispatcher.Operation{Event: ev, ProviderRef: req.ProviderRef, Reason: req.Reason, Force: req.Force}, err
	})
}

// operate applies the operator event that parse reads from the body, and
// answers with the intent as it is afterwards.
func (h *handler) operate(w http.ResponseWriter, r *http.Request, parse func(body []byte) (dispatcher.Operation, error)) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := principalOf(r)
	if err := h.authorizeIntent(r.Context(), p, id, ActionOperate); err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	op, err := parse(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	op.IntentID, op.Actor = id, p.Name
	before, after, err := dispatcher.Operate(r.Context(), h.pool, op)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.DebugContext(r.Context(), "intent state change", "intent_id", id, "channel", after.Channel,
		"event", op.Event, "from", before.Status, "to", after.Status, "actor", op.Actor)
	sc, err := h.scopeOf(r.Context(), p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sc.intent(after))
}

// reconcileIntent answers POST /v1/intents/{id}/reconcile: asks the provider now;
// with ?dry_run=true it reports the settlement without applying it.
func (h *handler) reconcileIntent(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.authorizeIntent(r.Context(), principalOf(r), id, ActionOperate); err != nil {
		h.fail(w, r, err)
		return
	}
	dryRun, err := queryBool(r, "dry_run")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.reconciler == nil {
		h.fail(w, r, fmt.Errorf("%w: no reconciler runs in this process", errUnavailable))
		return
	}
	s, err := h.reconciler.Reconcile(r.Context(), id, dryRun, principalOf(r).Name)
	if err != nil {
		h.fail(w, r, fmt.Errorf("reconcile intent %d: %w", id, err))
		return
	}
	if s.Applied {
		h.log.DebugContext(r.Context(), "intent state change", "intent_id", id, "event", "reconcile",
			"from", s.From, "to", s.To, "outcome", s.Outcome, "actor", principalOf(r).Name)
	}
	writeJSON(w, http.StatusOK, s)
}
