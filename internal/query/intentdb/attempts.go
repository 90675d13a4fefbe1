package intentdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// effectd.attempts: one row per provider call, lookup, poll, callback or
// operator's transition of an intent. The dispatcher's own attempts are
// written with the change they record (Complete, Settle, SettleByEvent).

//go:embed list_attempts.sql
var listAttemptsSQL string

//go:embed operator_attempt.sql
var operatorAttemptSQL string

// ListAttempts reads the newest limit attempts of intent id, oldest first.
func ListAttempts(ctx context.Context, db query.DB, id int64, limit int) ([]effectdtype.Attempt, error) {
	rows, err := db.Query(ctx, listAttemptsSQL, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.Attempt])
}

// OperatorAttempt is an operator's transition of an intent, as an attempt.
type OperatorAttempt struct {
	IntentID    int64
	Attempt     int    // the intent's attempt count when it was moved
	Event       string // the operator's event: the attempt's outcome
	ProviderRef *string
}

// RecordOperatorAttempt records a as an attempt of kind operator.
func RecordOperatorAttempt(ctx context.Context, db query.DB, a OperatorAttempt) error {
	_, err := db.Exec(ctx, operatorAttemptSQL, a.IntentID, a.Attempt, a.Event, a.ProviderRef)
	return err
}

// RecordOperatorAttemptBucket is RecordOperatorAttempt in the distributed
// mode, on the intent's bucket's shard (IntentBucket).
func RecordOperatorAttemptBucket(ctx context.Context, db query.DB, a OperatorAttempt) error {
	bucket, err := IntentBucket(ctx, db, a.IntentID)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, operatorAttemptBucketSQL, a.IntentID, a.Attempt, a.Event, a.ProviderRef, bucket)
	return err
}

//go:embed record_poll.sql
var recordPollSQL string

// Poll is one delivery poll of an intent, as RecordPoll writes it.
type Poll struct {
	IntentID    int64
	Key         string // the intent's idempotency key: no row has the id and the key, nothing is written
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
// delivery from p.From to p.To (when set) as a compare-and-set, both only on
// the row that still has p's id and key; it reports whether the delivery moved.
func RecordPoll(ctx context.Context, db query.DB, p Poll) (moved bool, err error) {
	var n int
	err = db.QueryRow(ctx, recordPollSQL, p.IntentID, p.Attempts, p.From, p.To, p.Detail, p.StartedAt,
		p.Outcome, p.Error, p.ProviderRef, p.Key).Scan(&n)
	return n == 1, err
}
