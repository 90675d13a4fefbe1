package citus

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage/internal/retention"
)

// Store is storage distributed by bucket on a Citus cluster.
type Store struct {
	pool      *pgxpool.Pool
	retention *retention.Pruner
	buckets   int
	owned     func() []int

	claimTurn atomic.Int64 // moves every claim round, so that no bucket is always served last
	pollTurn  atomic.Int64 // the same for delivery polls
}

// New returns the store on pool with buckets buckets, of which owned reports
// those this instance serves now (nil: none, as in an operator's process).
func New(pool *pgxpool.Pool, buckets int, owned func() []int) *Store {
	if owned == nil {
		owned = func() []int { return nil }
	}
	return &Store{pool: pool, retention: retention.New(pool), buckets: buckets, owned: owned}
}

// Mode is effectdtype.Citus.
func (s *Store) Mode() effectdtype.Storage { return effectdtype.Citus }

// Claim claims up to p.Limit intents of the buckets this instance holds, one
// single-shard claim per bucket, starting at a bucket that moves on every
// round; avail is the channel's tokens as the last claim saw them.
func (s *Store) Claim(ctx context.Context, run func(context.Context, func(query.TxDB) error) error, p intentdb.ClaimParams) (rows []intentdb.Claimed, avail float64, err error) {
	owned := s.owned()
	turn := int(s.claimTurn.Add(1))
	for i := range owned {
		if p.Limit <= 0 {
			break
		}
		b := owned[(i+turn)%len(owned)]
		var got []intentdb.Claimed
		var left float64
		err := run(ctx, func(db query.TxDB) (err error) {
			got, left, err = intentdb.ClaimBucket(ctx, db, p, int64(b))
			return err
		})
		if err != nil {
			return rows, avail, err
		}
		rows, avail = append(rows, got...), left
		p.Limit -= len(got)
		if p.RatePerSecond > 0 && left-float64(len(got)) < 1 {
			break // the channel's tokens are spent
		}
	}
	return rows, avail, nil
}

// Complete writes b on bucket's shard (intentdb.CompleteBucket).
func (s *Store) Complete(ctx context.Context, db query.TxDB, b *intentdb.CompleteBatch, recheck bool, bucket int64) ([]intentdb.Fenced, error) {
	return intentdb.CompleteBucket(ctx, db, b, recheck, bucket)
}

// TakeExpired takes up to n expired leases of the buckets this instance
// holds, one single-shard statement per bucket.
func (s *Store) TakeExpired(ctx context.Context, run func(context.Context, func(query.TxDB) error) error, n int, channels []string, lease time.Duration) (taken []intentdb.Unsettled, err error) {
	for _, b := range s.owned() {
		if len(taken) >= n {
			break
		}
		var got []intentdb.Unsettled
		err := run(ctx, func(db query.TxDB) (err error) {
			got, err = intentdb.TakeExpiredBucket(ctx, db, n-len(taken), channels, lease, int64(b))
			return err
		})
		if err != nil {
			return taken, err
		}
		taken = append(taken, got...)
	}
	return taken, nil
}

// Settle applies st on bucket's shard (intentdb.SettleBucket).
func (s *Store) Settle(ctx context.Context, db query.DB, st intentdb.SettleParams, bucket int64) (bool, error) {
	return intentdb.SettleBucket(ctx, db, st, bucket)
}

// EventIntent finds the event's intent's bucket first, by an index probe on
// every shard (the event carries none), then locks the intent on its shard
// (intentdb.EventIntentBucket); the writes that follow name that bucket.
func (s *Store) EventIntent(ctx context.Context, tx pgx.Tx, channel string, o intentdb.EventObject) (intentdb.EventTarget, error) {
	return intentdb.EventIntentBucket(ctx, tx, channel, o)
}

// SettleByEvent applies st on in's shard (intentdb.SettleByEventBucket).
func (s *Store) SettleByEvent(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, st intentdb.SettleByEventParams) (bool, error) {
	moved, err := intentdb.SettleByEventBucket(ctx, tx, st, in.Delivery, in.Bucket)
	return moved != nil, err
}

// SetDelivery applies c on in's shard (intentdb.SetDeliveryBucket).
func (s *Store) SetDelivery(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, c intentdb.DeliveryChange) (bool, error) {
	moved, err := intentdb.SetDeliveryBucket(ctx, tx, c, in.Bucket)
	return moved != nil, err
}

// LockPolls takes no lock: each instance polls the buckets it holds.
func (s *Store) LockPolls(context.Context, query.DB) (unlock func(), ok bool, err error) {
	return func() {}, true, nil
}

// PollDue lists up to limit intents of channel whose poll is due, of the
// buckets this instance holds, one single-shard statement per bucket,
// starting at a bucket that moves each round so that none waits behind the
// others.
func (s *Store) PollDue(ctx context.Context, db query.DB, channel string, delays []time.Duration, limit int) ([]intentdb.DuePoll, error) {
	var out []intentdb.DuePoll
	owned := s.owned()
	first := int(s.pollTurn.Add(1))
	for i := range owned {
		b := int64(owned[(first+i)%len(owned)])
		list, err := intentdb.PollDueBucket(ctx, db, channel, delays, limit-len(out), b)
		if err != nil {
			return out, err
		}
		for _, x := range list {
			x.Bucket = b
			out = append(out, x)
		}
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// RecordPoll records p on bucket's shard (intentdb.RecordPollBucket).
func (s *Store) RecordPoll(ctx context.Context, db query.DB, p intentdb.Poll, bucket int64) (bool, error) {
	m, err := intentdb.RecordPollBucket(ctx, db, p, bucket)
	return m != nil, err
}

// Prune goes bucket by bucket (intentdb.PruneBucket), in batches: a statement
// that locked rows across shards would be refused.
func (s *Store) Prune(ctx context.Context, db query.DB, channel string, keep time.Duration, batch int) (int64, error) {
	var total int64
	for b := range s.buckets {
		n, err := retention.InBatches(ctx, batch, func() (int64, error) { return intentdb.PruneBucket(ctx, db, channel, batch, keep, b) })
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// PruneDedupeKeys prunes the dedupe keys on every bucket's shard.
func (s *Store) PruneDedupeKeys(ctx context.Context, now time.Time) (int64, error) {
	scopes := make([]*int, s.buckets)
	for b := range scopes {
		scopes[b] = &b
	}
	return s.retention.PruneDedupeKeys(ctx, now, scopes)
}

// DropExpiredPartitions drops the expired partitions one by one
// (retention.Pruner.DropOneByOne): Citus detaches a partition of a
// distributed table only plainly, on every shard.
func (s *Store) DropExpiredPartitions(ctx context.Context, horizon time.Duration) ([]retentiondb.Partition, int, error) {
	return s.retention.DropOneByOne(ctx, horizon)
}

// FinishDetaches finishes the detaches a drop left half way
// (retention.Pruner.FinishDetaches).
func (s *Store) FinishDetaches(ctx context.Context) error { return s.retention.FinishDetaches(ctx) }
