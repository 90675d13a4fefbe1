package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/statemachine"
)

// Page sizes of GET /v1/intents.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

const (
	listIntentsSQL = `
SELECT ` + dispatcher.IntentColumns + ` FROM effectd.intents
WHERE id > $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR channel = $3)
  AND ($4::text IS NULL OR event_id = $4)
ORDER BY id
LIMIT $5`

	getIntentSQL = `SELECT ` + dispatcher.IntentColumns + ` FROM effectd.intents WHERE id = $1`

	listAttemptsSQL = `
SELECT id, attempt, kind, started_at, finished_at, outcome, error, provider_ref
FROM effectd.attempts WHERE intent_id = $1 ORDER BY id`

	listAuditSQL = `
SELECT id, at, actor, action, before, after
FROM effectd.audit WHERE intent_id = $1 ORDER BY id`
)

// intentPage is the response of GET /v1/intents.
type intentPage struct {
	Intents []dispatcher.IntentRow `json:"intents"`
	Next    *int64                 `json:"next"` // pass as ?after= for the next page; null on the last page
}

// attempt is one row of effectd.attempts.
type attempt struct {
	ID          int64      `json:"id"`
	Attempt     int        `json:"attempt"`
	Kind        string     `json:"kind"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Outcome     string     `json:"outcome"`
	Error       *string    `json:"error"`
	ProviderRef *string    `json:"provider_ref"`
}

// auditEntry is one row of effectd.audit.
type auditEntry struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// intentDetail is the response of GET /v1/intents/{id}.
type intentDetail struct {
	Intent   dispatcher.IntentRow `json:"intent"`
	Attempts []attempt            `json:"attempts"`
	Audit    []auditEntry         `json:"audit"`
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
	limit, err := queryInt(r, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	after, err := queryInt(r, "after", 0, 0, 1<<62)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows, err := h.pool.Query(r.Context(), listIntentsSQL, after, status, channel, eventID, limit+1)
	if err != nil {
		h.fail(w, r, fmt.Errorf("list intents: %w", err))
		return
	}
	intents, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dispatcher.IntentRow, error) {
		return dispatcher.ScanIntent(row)
	})
	if err != nil {
		h.fail(w, r, fmt.Errorf("list intents: %w", err))
		return
	}
	page := intentPage{Intents: intents}
	if int64(len(intents)) > limit {
		page.Intents = intents[:limit]
		next := page.Intents[limit-1].ID
		page.Next = &next
	}
	writeJSON(w, http.StatusOK, page)
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
	d, err := h.intentDetail(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
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
	d.Intent, err = dispatcher.ScanIntent(tx.QueryRow(ctx, getIntentSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, dispatcher.ErrNotFound
	}
	if err != nil {
		return d, err
	}
	rows, _ := tx.Query(ctx, listAttemptsSQL, id)
	if d.Attempts, err = pgx.CollectRows(rows, pgx.RowToStructByPos[attempt]); err != nil {
		return d, err
	}
	rows, _ = tx.Query(ctx, listAuditSQL, id)
	if d.Audit, err = pgx.CollectRows(rows, pgx.RowToStructByPos[auditEntry]); err != nil {
		return d, err
	}
	return d, nil
}

// retryIntent answers POST /v1/intents/{id}/retry: FAILED, SKIPPED or IN_DOUBT back to PENDING.
func (h *handler) retryIntent(w http.ResponseWriter, r *http.Request) {
	h.operate(w, r, func(body []byte) (dispatcher.Operation, error) {
		reason, err := parseReason(body)
		return dispatcher.Operation{Event: statemachine.Requeue, Reason: reason}, err
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
		return dispatcher.Operation{Event: ev, ProviderRef: req.ProviderRef, Reason: req.Reason}, err
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
	op.IntentID, op.Actor = id, principalOf(r).Name
	before, after, err := dispatcher.Operate(r.Context(), h.pool, op)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.DebugContext(r.Context(), "intent state change", "intent_id", id, "channel", after.Channel,
		"event", op.Event, "from", before.Status, "to", after.Status, "actor", op.Actor)
	writeJSON(w, http.StatusOK, after)
}

// reconcileIntent answers POST /v1/intents/{id}/reconcile: asks the provider now;
// with ?dry_run=true it reports the settlement without applying it.
func (h *handler) reconcileIntent(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
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
