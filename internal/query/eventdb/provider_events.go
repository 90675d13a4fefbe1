package eventdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
)

// effectd.provider_events: every provider event received, once per provider,
// channel and event id, with what it did.

//go:embed record_event.sql
var recordEventSQL string

//go:embed event_outcome.sql
var eventOutcomeSQL string

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
func RecordEvent(ctx context.Context, db query.DB, e Event) (id int64, inserted bool, err error) {
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
func SetEventOutcome(ctx context.Context, db query.DB, id, intentID int64, outcome string) error {
	_, err := db.Exec(ctx, eventOutcomeSQL, id, intentID, outcome)
	return err
}
