package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
)

// ProviderEvent is one row of effectd.provider_events: an event a provider sent
// (a Twilio status callback, a Stripe event).
type ProviderEvent struct {
	ID         int64           `json:"id"`
	Provider   string          `json:"provider"`
	EventID    string          `json:"event_id"`
	Channel    string          `json:"channel"`
	IntentID   *int64          `json:"intent_id"` // null: an orphan
	ObjectRef  *string         `json:"object_ref"`
	Type       string          `json:"type"`
	Status     *string         `json:"status"`
	Delivery   *string         `json:"delivery"`
	Detail     *string         `json:"detail"`
	Outcome    string          `json:"outcome"`
	Payload    json.RawMessage `json:"payload"`
	ReceivedAt time.Time       `json:"received_at"`
}

// eventPage is the response of GET /v1/provider-events.
type eventPage struct {
	Events []ProviderEvent `json:"events"`
	Next   *int64          `json:"next"`
}

// listEvents answers GET /v1/provider-events?orphan=&channel=&intent_id=&limit=&after=,
// keyset-paginated by id, within the channels the caller may see.
func (h *handler) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	orphan := false
	if s := q.Get("orphan"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			h.fail(w, r, fmt.Errorf("%w: orphan: must be true or false, got %q", dispatcher.ErrInvalid, truncate(s, 40)))
			return
		}
		orphan = b
	}
	var channel *string
	if s := q.Get("channel"); s != "" {
		channel = &s
	}
	var intentID *int64
	if q.Get("intent_id") != "" {
		id, err := queryInt(r, "intent_id", 0, 1, 1<<62)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		intentID = &id
	}
	limit, after, err := queryPage(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sc, err := h.scopeOf(r.Context(), principalOf(r))
	if err != nil {
		h.fail(w, r, fmt.Errorf("list provider events: %w", err))
		return
	}
	rows, err := query.ListEvents(r.Context(), h.pool, query.EventFilter{After: after, Limit: limit + 1, OrphansOnly: orphan,
		Channel: channel, IntentID: intentID, Channels: sc.visible})
	if err != nil {
		h.fail(w, r, fmt.Errorf("list provider events: %w", err))
		return
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProviderEvent, error) {
		var e ProviderEvent
		err := row.Scan(&e.ID, &e.Provider, &e.EventID, &e.Channel, &e.IntentID, &e.ObjectRef, &e.Type, &e.Status,
			&e.Delivery, &e.Detail, &e.Outcome, &e.Payload, &e.ReceivedAt)
		if len(sc.redact[e.Channel]) > 0 {
			// The provider's own names (To, Body) differ from the payload's:
			// every value is masked, the object and its keys kept.
			e.Payload = dispatcher.MaskValues(e.Payload)
		}
		return e, err
	})
	if err != nil {
		h.fail(w, r, fmt.Errorf("list provider events: %w", err))
		return
	}
	page := eventPage{Events: events}
	if int64(len(events)) > limit {
		page.Events = events[:limit]
		next := page.Events[limit-1].ID
		page.Next = &next
	}
	writeJSON(w, http.StatusOK, page)
}
