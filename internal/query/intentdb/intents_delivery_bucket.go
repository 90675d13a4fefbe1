package intentdb

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
)

// The writes of an intent's delivery in the distributed mode (docs/scale.md,
// "Delivery"): the statements of intents_delivery.go and RecordPoll, each
// restricted to the intent's bucket so that Citus runs it on that bucket's
// shard alone. A provider event carries no bucket: EventIntentBucket finds
// it first, by an index probe on every shard.

//go:embed event_bucket_by_id.sql
var eventBucketByIDSQL string

//go:embed event_bucket_by_ref.sql
var eventBucketByRefSQL string

//go:embed event_intent_bucket.sql
var eventIntentBucketSQL string

//go:embed settle_by_event_bucket.sql
var settleByEventBucketText string

var settleByEventBucketSQL = withNotices("settle_by_event_bucket.sql", settleByEventBucketText)

//go:embed set_delivery_bucket.sql
var setDeliveryBucketText string

var setDeliveryBucketSQL = withNotices("set_delivery_bucket.sql", setDeliveryBucketText)

//go:embed record_poll_bucket.sql
var recordPollBucketText string

var recordPollBucketSQL = withNotices("record_poll_bucket.sql", recordPollBucketText)

//go:embed poll_due_bucket.sql
var pollDueBucketSQL string

// DeliveryMoved is what a delivery-changing statement of the distributed
// mode changed on one intent (the statement has counted it already).
type DeliveryMoved struct {
	Bucket      int64     `db:"bucket"`
	CreatedAt   time.Time `db:"created_at"`
	Channel     string    `db:"channel"`
	OldStatus   string    `db:"old_status"`
	Status      string    `db:"status"`
	OldDelivery string    `db:"old_delivery"` // "" = unknown
	Delivery    string    `db:"delivery"`     // "" = unknown
}

// EventIntentBucket is EventIntent in the distributed mode: it finds the
// intent's bucket and key (by the object's intent id and event id, else by
// its reference; a read of every shard, one index probe in each day
// partition), then locks the intent with that key on its bucket's shard.
// pgx.ErrNoRows when there is none: the event is an orphan.
func EventIntentBucket(ctx context.Context, db query.DB, channel string, o EventObject) (t EventTarget, err error) {
	var id int64
	var key string
	if o.IntentID != 0 && o.EventID != "" {
		err = db.QueryRow(ctx, eventBucketByIDSQL, channel, o.IntentID, o.EventID).Scan(&t.Bucket, &id, &key)
	} else {
		err = db.QueryRow(ctx, eventBucketByRefSQL, channel, o.Ref).Scan(&t.Bucket, &id, &key)
	}
	if err != nil {
		return t, err
	}
	bucket := t.Bucket
	t, err = oneTarget(db.Query(ctx, eventIntentBucketSQL, bucket, id, channel, key))
	t.Bucket = bucket
	return t, err
}

// scanMoved reads, by column name, the row a delivery-changing statement
// returns; nil when it returned none (fenced out, or the delivery was no
// longer the one expected).
func scanMoved(rows pgx.Rows, err error) (*DeliveryMoved, error) {
	if err != nil {
		return nil, err
	}
	m, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[DeliveryMoved])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// SettleByEventBucket is SettleByEvent for an intent of bucket whose
// delivery is still from (the compare-and-set includes it). It returns what
// moved, nil when fenced out.
func SettleByEventBucket(ctx context.Context, db query.DB, s SettleByEventParams, from string, bucket int64) (*DeliveryMoved, error) {
	return scanMoved(db.Query(ctx, settleByEventBucketSQL, s.IntentID, s.Attempts, s.From, s.ProviderRef, s.Outcome,
		s.Delivery, s.Detail, from, bucket, s.Key))
}

// SetDeliveryBucket is SetDelivery for an intent of bucket. It returns what
// moved, nil when the delivery was no longer c.From or no intent has c's id
// and key any more.
func SetDeliveryBucket(ctx context.Context, db query.DB, c DeliveryChange, bucket int64) (*DeliveryMoved, error) {
	return scanMoved(db.Query(ctx, setDeliveryBucketSQL, c.IntentID, c.From, c.To, c.Detail, bucket, c.Key))
}

// RecordPollBucket is RecordPoll for an intent of bucket. It returns what
// moved, nil when the delivery did not move.
func RecordPollBucket(ctx context.Context, db query.DB, p Poll, bucket int64) (*DeliveryMoved, error) {
	return scanMoved(db.Query(ctx, recordPollBucketSQL, p.IntentID, p.Attempts, p.From, p.To, p.Detail, p.StartedAt,
		p.Outcome, p.Error, p.ProviderRef, bucket, p.Key))
}

// PollDueBucket is PollDue for the intents of one bucket.
func PollDueBucket(ctx context.Context, db query.DB, channel string, delays []time.Duration, limit int, bucket int64) ([]DuePoll, error) {
	ivs := make([]pgtype.Interval, len(delays))
	for i, d := range delays {
		ivs[i] = query.Interval(d)
	}
	rows, err := db.Query(ctx, pollDueBucketSQL, channel, ivs, limit, bucket)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[DuePoll])
}
