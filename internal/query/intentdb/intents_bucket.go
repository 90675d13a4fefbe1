package intentdb

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The hot path of the distributed mode (docs/scale.md, "Buckets"): the same
// operations as Claim, Complete and TakeExpired, each restricted to one
// bucket, so that Citus runs it on that bucket's shard alone.

//go:embed claim_bucket.sql
var claimBucketSQL string

//go:embed rate_tokens_take.sql
var rateTokensTakeSQL string

//go:embed rate_tokens_spend.sql
var rateTokensSpendSQL string

// ClaimBucket is Claim for the intents of one bucket. A rate-limited
// channel's tokens are read under the lock of its row on the coordinator,
// rows are claimed on the bucket's shard, and the tokens spent, in one
// transaction: the row lock serialises the channel's claims across instances
// as in Claim, over two more round trips.
func ClaimBucket(ctx context.Context, pool query.TxDB, p ClaimParams, bucket int64) (claimed []Claimed, avail float64, err error) {
	if p.RatePerSecond <= 0 {
		claimed, err = claimBucket(ctx, pool, p, bucket)
		return claimed, 0, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, rateTokensTakeSQL, p.Channel, p.RatePerSecond, p.Burst).Scan(&avail)
		if errors.Is(err, pgx.ErrNoRows) {
			avail, claimed = 0, nil // no rate tokens: nothing may be claimed, as in claim.sql
			return nil
		}
		if err != nil {
			return err
		}
		limit := min(p.Limit, int(max(0, math.Floor(avail))))
		if limit == 0 {
			return nil
		}
		q := p
		q.Limit = limit
		if claimed, err = claimBucket(ctx, tx, q, bucket); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, rateTokensSpendSQL, p.Channel, avail-float64(len(claimed)))
		return err
	})
	return claimed, avail, err
}

func claimBucket(ctx context.Context, db query.DB, p ClaimParams, bucket int64) ([]Claimed, error) {
	rows, err := db.Query(ctx, claimBucketSQL, p.Channel, query.Interval(p.Lease), p.Limit, bucket)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	claimed := make([]Claimed, 0, p.Limit)
	for rows.Next() {
		c := Claimed{Bucket: bucket}
		var traceparent pgtype.Text
		created, occurred := query.LooseTime{Field: "created_at"}, query.LooseTime{Field: "occurred_at"}
		if err := rows.Scan(&c.ID, &c.EventID, &c.Payload, &c.Attempts, &c.Key, &created, &occurred, &traceparent); err != nil {
			return claimed, err
		}
		c.CreatedAt, c.OccurredAt, c.Traceparent = created.Time, occurred.Time, traceparent.String
		c.Problem = cmp.Or(occurred.Problem, created.Problem)
		claimed = append(claimed, c)
	}
	return claimed, rows.Err()
}

//go:embed complete_bucket.sql
var completeBucketText string

var completeBucketSQL = withNotices("complete_bucket.sql", completeBucketText)

// CompleteBucket is Complete for a batch whose intents are all in bucket.
// Citus runs its parts as several statements on the bucket's shard within
// the statement's transaction, each seeing the ones before: a completion
// whose row changed while it waited comes back as settled by the event, or
// fenced, at once, rather than Raced.
func CompleteBucket(ctx context.Context, db query.DB, b *CompleteBatch, recheck bool, bucket int64) ([]Fenced, error) {
	rows, err := db.Query(ctx, completeBucketSQL, b.ids, b.attempts, b.statuses, b.refs, b.errs,
		b.next, b.started, b.finished, b.outcomes, b.called, b.delivery, recheck, b.keys, b.oldest, b.newest, bucket, b.lookAfter)
	if err != nil {
		return nil, err
	}
	return scanFenced(rows)
}

//go:embed take_expired_bucket.sql
var takeExpiredBucketSQL string

// TakeExpiredBucket is TakeExpired for the intents of one bucket.
func TakeExpiredBucket(ctx context.Context, db query.DB, limit int, channels []string, lease time.Duration, bucket int64) ([]Unsettled, error) {
	rows, err := db.Query(ctx, takeExpiredBucketSQL, limit, channels, query.Interval(lease), bucket)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Unsettled, error) {
		u, err := scanUnsettled(row)
		u.Bucket = bucket
		return u, err
	})
}

//go:embed settle_bucket.sql
var settleBucketText string

var settleBucketSQL = withNotices("settle_bucket.sql", settleBucketText)

// SettleBucket is Settle for an intent of bucket.
func SettleBucket(ctx context.Context, db query.DB, s SettleParams, bucket int64) (applied bool, err error) {
	var n int
	err = db.QueryRow(ctx, settleBucketSQL, s.IntentID, s.Attempts, s.From, s.To, query.NullString(s.ProviderRef),
		query.NullString(s.Error), s.StartedAt, s.Outcome, s.Key, bucket).Scan(&n)
	return n == 1, err
}

//go:embed operate_bucket.sql
var operateBucketText string

var operateBucketSQL = withNotices("operate_bucket.sql", operateBucketText)

//go:embed intent_bucket.sql
var intentBucketSQL string

// IntentBucket returns intent id's bucket in the distributed mode (-1 when
// there is no such intent: a statement of that bucket finds nothing).
// Operator actions name an intent by id; in the distributed mode they read
// its bucket first and write on its shard.
func IntentBucket(ctx context.Context, db query.DB, id int64) (bucket int64, err error) {
	err = db.QueryRow(ctx, intentBucketSQL, id).Scan(&bucket)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	return bucket, err
}

// SettleByIDBucket is Settle for an intent named by id alone in the
// distributed mode: it reads the intent's bucket first, then settles it on
// its bucket's shard (SettleBucket), as OperateBucket does. An operator's
// reconcile runs it.
func SettleByIDBucket(ctx context.Context, db query.DB, s SettleParams) (applied bool, err error) {
	bucket, err := IntentBucket(ctx, db, s.IntentID)
	if err != nil {
		return false, err
	}
	return SettleBucket(ctx, db, s, bucket)
}

//go:embed intents_lock_bucket.sql
var intentsLockBucketSQL string

//go:embed operate_bulk_bucket.sql
var operateBulkBucketText string

var operateBulkBucketSQL = withNotices("operate_bulk_bucket.sql", operateBulkBucketText)

// LockIntentsBucket reads intents ids of bucket, whole, by id, and locks them
// until db's transaction ends. An id with no intent of bucket is left out.
func LockIntentsBucket(ctx context.Context, db query.DB, bucket int64, ids []int64) ([]effectdtype.IntentRow, error) {
	rows, err := db.Query(ctx, intentsLockBucketSQL, bucket, ids)
	if err != nil {
		return nil, err
	}
	return query.CollectIntents(rows)
}

// Move is one intent's part of OperateBulkBucket: from status From, with
// Attempts, Delivery ("" for none) and idempotency key Key as locked, to
// status To.
type Move struct {
	ID       int64
	From     statemachine.State
	Attempts int
	Delivery string
	Key      string
	To       statemachine.State
}

// OperateBulkBucket applies moves, every one an intent of bucket locked by
// LockIntentsBucket in db's transaction, as fenced compare-and-sets with
// their count deltas and an operator attempt of event each, in one statement
// on the bucket's shard; it returns the intents it changed, by id.
func OperateBulkBucket(ctx context.Context, db query.DB, bucket int64, event string, moves []Move) ([]effectdtype.IntentRow, error) {
	ids, froms, attempts := make([]int64, len(moves)), make([]string, len(moves)), make([]int32, len(moves))
	deliveries, tos, keys := make([]string, len(moves)), make([]string, len(moves)), make([]string, len(moves))
	for i, m := range moves {
		ids[i], froms[i], attempts[i], deliveries[i], tos[i], keys[i] = m.ID, string(m.From), int32(m.Attempts), m.Delivery, string(m.To), m.Key
	}
	rows, err := db.Query(ctx, operateBulkBucketSQL, ids, froms, attempts, tos, deliveries, bucket, event, keys)
	if err != nil {
		return nil, err
	}
	return query.CollectIntents(rows)
}
