package attemptdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed list_attempts.sql
var listAttemptsSQL string

//go:embed operator_attempt.sql
var operatorAttemptSQL string

//go:embed operator_attempt_bucket.sql
var operatorAttemptBucketSQL string

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
// mode, on the shard of bucket, the intent's.
func RecordOperatorAttemptBucket(ctx context.Context, db query.DB, a OperatorAttempt, bucket int64) error {
	_, err := db.Exec(ctx, operatorAttemptBucketSQL, a.IntentID, a.Attempt, a.Event, a.ProviderRef, bucket)
	return err
}
