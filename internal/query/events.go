package query

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed record_event.sql
var recordEventSQL string

// EventOutcome records what provider event $1 did: intent $2 (0 = none) and outcome $3.
//
//go:embed event_outcome.sql
var EventOutcome string

// TryLock takes session advisory lock $1 if it is free, and says whether it did.
//
//go:embed try_lock.sql
var TryLock string

// Unlock releases session advisory lock $1.
//
//go:embed unlock.sql
var Unlock string

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

//go:embed record_poll.sql
var recordPollSQL string

// Poll is one delivery poll of an intent, as RecordPoll writes it.
type Poll struct {
	IntentID    int64
	Attempts    int32  // the attempt number the poll is recorded under
	From        string // the delivery the poll started from ("" = unknown): the compare-and-set
	To          string // the delivery to move to; "" = none
	Detail      string // the provider's status and error code
	StartedAt   time.Time
	Outcome     string // recorded on the poll attempt
	Error       string // "" = none
	ProviderRef string
}

// RecordPoll records p as an attempt of kind poll and moves the intent's
// delivery from p.From to p.To (when set) as a compare-and-set; it reports
// whether the delivery moved.
func RecordPoll(ctx context.Context, db DB, p Poll) (moved bool, err error) {
	var n int
	err = db.QueryRow(ctx, recordPollSQL, p.IntentID, p.Attempts, p.From, p.To, p.Detail, p.StartedAt,
		p.Outcome, p.Error, p.ProviderRef).Scan(&n)
	return n == 1, err
}
