package intentdb

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The writes of an intent's delivery (effectd.intents' delivery columns):
// what a provider event reports of an intent, and the delivery polls.

//go:embed event_intent.sql
var eventIntentSQL string

//go:embed settle_by_event.sql
var settleByEventSQL string

//go:embed set_delivery.sql
var setDeliverySQL string

//go:embed poll_due.sql
var pollDueSQL string

// EventTarget is the intent a provider event is about, locked for the event's
// transaction.
type EventTarget struct {
	ID          int64              `db:"id"`
	Status      statemachine.State `db:"status"`
	Attempts    int32              `db:"attempts"`
	ProviderRef string             `db:"provider_ref"` // "" = none
	Delivery    string             `db:"delivery"`     // a statemachine.Delivery; "" = unknown
	DeliveryAt  *time.Time         `db:"delivery_at"`  // when the delivery last moved
	Key         string             `db:"key"`          // its idempotency key: the writes that follow fence on it
	Traceparent string             `db:"traceparent"`  // the producer's trace context kept at enqueue; "" = none
	Bucket      int64              `db:"-"`            // the distributed mode's bucket (EventIntentBucket); 0 otherwise
}

// EventObject is what a provider event says about the object it reports on:
// what effectd stamped on it, and its reference.
type EventObject struct {
	IntentID int64  // effect.MetaIntentID; 0 = none
	EventID  string // effect.MetaEventID, the producer's event id; "" = none
	Ref      string // the provider's reference of the object
}

// EventIntent locks the intent of channel that a provider event is about: the
// one with both the id and the producer's event id effectd stamped on the
// provider's object, else (either missing) the oldest intent whose provider
// reference is the object's. An id alone names no intent: a failover that
// lost an enqueue hands its id out again. pgx.ErrNoRows when there is none:
// the event is an orphan.
func EventIntent(ctx context.Context, db query.DB, channel string, o EventObject) (EventTarget, error) {
	return oneTarget(db.Query(ctx, eventIntentSQL, channel, o.IntentID, o.Ref, o.EventID))
}

// oneTarget reads the first row of rows, by column name; pgx.ErrNoRows when
// there is none.
func oneTarget(rows pgx.Rows, err error) (EventTarget, error) {
	if err != nil {
		return EventTarget{}, err
	}
	return pgx.CollectOneRow(rows, pgx.RowToStructByName[EventTarget])
}

// SettleByEventParams are SettleByEvent's: a SENDING or IN_DOUBT intent
// settled as SENT because a provider event says the provider holds its
// effect.
type SettleByEventParams struct {
	IntentID    int64
	Key         string // the intent's idempotency key: the fence, with Attempts and From
	Attempts    int32  // the fence, with From
	From        string // SENDING or IN_DOUBT
	ProviderRef string // the event's object
	Outcome     string // recorded on the callback attempt
	Delivery    string // the delivery it becomes; "" leaves it
	Detail      string // the delivery's detail; "" = none
}

// SettleByEvent applies s as a fenced compare-and-set, with its delivery in
// the same statement so that the notification of SENT tells it, and records
// an attempt of kind callback. It reports whether s was applied (false:
// fenced out).
func SettleByEvent(ctx context.Context, db query.DB, s SettleByEventParams) (applied bool, err error) {
	var id int64
	err = db.QueryRow(ctx, settleByEventSQL, s.IntentID, s.Attempts, s.From, s.ProviderRef, s.Outcome, s.Delivery, s.Detail, s.Key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// DeliveryChange moves an intent's delivery as a compare-and-set.
type DeliveryChange struct {
	IntentID int64
	Key      string // the intent's idempotency key: the fence, with From
	From     string // the delivery it must still have; "" = unknown
	To       string
	Detail   string // the provider's status and error code; "" = none
}

// SetDelivery applies c and reports whether the delivery moved (false: it
// was no longer c.From, or no intent has c's id and key any more).
func SetDelivery(ctx context.Context, db query.DB, c DeliveryChange) (moved bool, err error) {
	tag, err := db.Exec(ctx, setDeliverySQL, c.IntentID, c.From, c.To, c.Detail, c.Key)
	return tag.RowsAffected() == 1, err
}

// DuePoll is a SENT intent whose delivery poll is due.
type DuePoll struct {
	ID          int64     `db:"id"`
	ProviderRef string    `db:"provider_ref"`
	Delivery    string    `db:"delivery"` // a statemachine.Delivery; "" = unknown
	Attempts    int32     `db:"attempts"`
	Polls       int       `db:"polls"`       // polls made so far
	Since       time.Time `db:"since"`       // when the delivery last moved (else the row)
	Key         string    `db:"key"`         // its idempotency key: the poll's record fences on it
	EventID     string    `db:"event_id"`    // the producer's event id
	Traceparent string    `db:"traceparent"` // the producer's trace context kept at enqueue; "" = none
	CreatedAt   time.Time `db:"created_at"`  // when it was enqueued
	Bucket      int64     `db:"-"`           // the distributed mode's bucket (set by its store, not read); 0 otherwise
}

// PollDue lists up to limit SENT intents of channel whose delivery is not
// final and whose next poll is due: the n-th poll at delivery_at + delays[n].
func PollDue(ctx context.Context, db query.DB, channel string, delays []time.Duration, limit int) ([]DuePoll, error) {
	ivs := make([]pgtype.Interval, len(delays))
	for i, d := range delays {
		ivs[i] = query.Interval(d)
	}
	rows, err := db.Query(ctx, pollDueSQL, channel, ivs, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[DuePoll])
}
