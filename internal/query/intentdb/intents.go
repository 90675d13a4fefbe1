package intentdb

import (
	"context"
	_ "embed"

	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The writes of whole intents (effectd.intents) that producers and operators
// make. Every statement that returns whole intents spells out the select list
// of internal/query/intent_columns.sql, in the order query.ScanIntent reads it
// (TestIntentColumns holds them to it).

//go:embed operate.sql
var operateSQL string

//go:embed maybe_applied.sql
var maybeAppliedSQL string

//go:embed enqueue.sql
var enqueueSQL string

//go:embed enqueue_traced.sql
var enqueueTracedSQL string

// Transition is an operator's transition of one intent, as Operate applies it.
type Transition struct {
	IntentID int64
	Key      string             // the idempotency key it was read with: the fence, with From and Attempts
	From     statemachine.State // the status it was read in: the fence, with Attempts
	Attempts int
	To       statemachine.State
	// ProviderRef, when not nil, becomes the intent's provider reference
	// (an operator's "resolve as sent").
	ProviderRef *string
}

// Operate applies t to its intent as a fenced compare-and-set: the row changes
// only while it is still in t.From with t.Attempts, and never while it is
// SENDING under a live lease. SENT makes an unknown delivery accepted in the
// same statement. It returns the intent after, whole, or pgx.ErrNoRows when
// the fence held it back.
func Operate(ctx context.Context, db query.DB, t Transition) (effectdtype.IntentRow, error) {
	return query.ScanIntent(db.QueryRow(ctx, operateSQL, t.IntentID, t.From, t.Attempts, t.To, t.ProviderRef, t.Key))
}

// OperateBucket is Operate in the distributed mode: it reads the intent's
// bucket first (IntentBucket), then applies t on its bucket's shard.
func OperateBucket(ctx context.Context, db query.DB, t Transition) (effectdtype.IntentRow, error) {
	bucket, err := IntentBucket(ctx, db, t.IntentID)
	if err != nil {
		return effectdtype.IntentRow{}, err
	}
	return query.ScanIntent(db.QueryRow(ctx, operateBucketSQL, t.IntentID, t.From, t.Attempts, t.To, t.ProviderRef, bucket, t.Key))
}

// CallHistory is what the provider's key window rule needs of an intent.
type CallHistory struct {
	Provider string    // the channel's provider; "" when the channel is not registered
	Now      time.Time // the database's clock
	Called   bool      // a provider call was ever made for the intent
}

// MaybeApplied reads, for intent id of channel, whether its effect may have
// been applied: the channel's provider, the database's clock, and whether a
// call was ever made.
func MaybeApplied(ctx context.Context, db query.DB, id int64, channel string) (h CallHistory, err error) {
	err = db.QueryRow(ctx, maybeAppliedSQL, id, channel).Scan(&h.Provider, &h.Now, &h.Called)
	return h, err
}

// NewIntent is an intent as Enqueue records it; a nil field is not given.
type NewIntent struct {
	EventID     string
	Channel     string
	Payload     string // JSON text
	OccurredAt  *time.Time
	NotBefore   *time.Time
	OrderingKey *string
	// Traceparent is the producer's trace context (W3C traceparent): set,
	// it is effectd.traceparent for the rest of the transaction and the
	// intent keeps it; "" leaves the transaction's setting as it is.
	Traceparent string
}

// Enqueue records n through effectd.enqueue, in the caller's transaction. It
// reports whether the intent is new (false: a duplicate of its event id and
// channel, which changes nothing). effectd.enqueue's refusals of bad input
// come back as *pgconn.PgError.
func Enqueue(ctx context.Context, db query.RowQuerier, n NewIntent) (inserted bool, err error) {
	if n.Traceparent != "" {
		err = db.QueryRow(ctx, enqueueTracedSQL, n.EventID, n.Channel, n.Payload, n.OccurredAt, n.NotBefore, n.OrderingKey, n.Traceparent).Scan(&inserted)
		return inserted, err
	}
	err = db.QueryRow(ctx, enqueueSQL, n.EventID, n.Channel, n.Payload, n.OccurredAt, n.NotBefore, n.OrderingKey).Scan(&inserted)
	return inserted, err
}
