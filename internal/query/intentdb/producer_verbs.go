package intentdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed cancel.sql
var cancelSQL string

//go:embed status.sql
var statusSQL string

//go:embed enqueue_many.sql
var enqueueManySQL string

//go:embed set_traceparent.sql
var setTraceparentSQL string

// SetTraceparent makes traceparent the producer's trace context for the rest
// of the caller's transaction: the intents it inserts keep it.
func SetTraceparent(ctx context.Context, db query.RowQuerier, traceparent string) error {
	var set string
	return db.QueryRow(ctx, setTraceparentSQL, traceparent).Scan(&set)
}

// Cancel cancels a PENDING intent through effectd.cancel, in the caller's
// transaction, and returns its status after the call (nil: no such intent).
func Cancel(ctx context.Context, db query.RowQuerier, eventID, channel, reason string, bucket *int64) (status *string, err error) {
	err = db.QueryRow(ctx, cancelSQL, eventID, channel, reason, bucket).Scan(&status)
	return status, err
}

// Status reads an intent through effectd.status; pgx.ErrNoRows (or
// sql.ErrNoRows) when there is no such intent.
func Status(ctx context.Context, db query.RowQuerier, eventID, channel string, bucket *int64) (s effectdtype.IntentStatus, err error) {
	err = db.QueryRow(ctx, statusSQL, eventID, channel, bucket).
		Scan(&s.Status, &s.Attempts, &s.ProviderRef, &s.Delivery, &s.LastErrorClass, &s.NextAttemptAt)
	return s, err
}

// NewIntents is a batch for EnqueueMany as parallel columns, one element per
// intent; nil elements are not given.
type NewIntents struct {
	EventIDs, Channels, Payloads []string
	OccurredAt, NotBefore        []*time.Time
	OrderingKeys                 []*string
}

// BatchAnswer is effectd.enqueue_many's answer for one intent.
type BatchAnswer struct {
	Outcome string  `json:"outcome"` // new, duplicate or invalid
	Field   *string `json:"field"`
	Message *string `json:"message"`
}

// EnqueueMany records a batch through effectd.enqueue_many, in the caller's
// transaction, and returns an answer per intent in the batch's order.
func EnqueueMany(ctx context.Context, db query.RowQuerier, n NewIntents, keepValid bool, bucket *int64) ([]BatchAnswer, error) {
	var text string
	if err := db.QueryRow(ctx, enqueueManySQL, n.EventIDs, n.Channels, n.Payloads, n.OccurredAt, n.NotBefore, n.OrderingKeys, keepValid, bucket).Scan(&text); err != nil {
		return nil, err
	}
	var answers []BatchAnswer
	err := json.Unmarshal([]byte(text), &answers)
	return answers, err
}
