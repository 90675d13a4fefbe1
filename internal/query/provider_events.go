package query

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
)

// effectd.provider_events: every provider event received, once per provider,
// channel and event id, with what it did.

//go:embed record_event.sql
var recordEventSQL string

//go:embed event_outcome.sql
var eventOutcomeSQL string

//go:embed list_events.sql
var listEventsSQL string

// Event is a provider event as RecordEvent stores it; "" stores NULL for
// ObjectRef, Status, Delivery and Detail.
type Event struct {
	Provider  string
	EventID   string
	Channel   string
	ObjectRef string
	Type      string
	Status    string
	Delivery  string
	Detail    string
	Payload   json.RawMessage
}

//go:embed record_event_lock.sql
var recordEventLockSQL string

// RecordEvent stores e once, as an orphan, and returns its row id; a repeat
// (same provider, channel and event id) stores nothing and returns inserted false.
// db must be a transaction: the lock that serialises copies of one event is
// held until it ends.
func RecordEvent(ctx context.Context, db DB, e Event) (id int64, inserted bool, err error) {
	if _, err := db.Exec(ctx, recordEventLockSQL, e.Provider, e.EventID, e.Channel); err != nil {
		return 0, false, err
	}
	err = db.QueryRow(ctx, recordEventSQL, e.Provider, e.EventID, e.Channel, e.ObjectRef, e.Type,
		e.Status, e.Delivery, e.Detail, e.Payload).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// SetEventOutcome records what provider event row id did: the intent it is
// about (0: none, an orphan) and its outcome.
func SetEventOutcome(ctx context.Context, db DB, id, intentID int64, outcome string) error {
	_, err := db.Exec(ctx, eventOutcomeSQL, id, intentID, outcome)
	return err
}

// EventFilter selects a page of provider events for ListEvents. A nil field
// does not filter.
type EventFilter struct {
	After       int64 // ids above this one
	Limit       int64
	OrphansOnly bool
	Channel     *string
	IntentID    *int64
	Channels    []string // among these channels; nil: every channel
}

// ListEvents reads up to f.Limit provider events by id.
func ListEvents(ctx context.Context, db DB, f EventFilter) ([]effectdtype.ProviderEvent, error) {
	sql, args := f.statement()
	rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[effectdtype.ProviderEvent])
}

// statement builds ListEvents's statement and its arguments.
func (f EventFilter) statement() (string, []any) {
	s := newStmt(listEventsSQL, f.After, f.Limit)
	if f.OrphansOnly {
		s.and("intent_id IS NULL")
	}
	if f.Channel != nil {
		s.and("channel = %s", *f.Channel)
	}
	if f.IntentID != nil {
		s.and("intent_id = %s", *f.IntentID)
	}
	if f.Channels != nil {
		s.and("channel = ANY (%s::text[])", f.Channels)
	}
	s.raw("ORDER BY id\nLIMIT $2")
	return s.sql(), s.args
}
