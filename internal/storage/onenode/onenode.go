package onenode

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage/internal/retention"
)

// pollLockKey lets one instance at a time poll deliveries.
const pollLockKey = 0x65666671 // "effq"

// Store is storage on one PostgreSQL.
type Store struct {
	pool      *pgxpool.Pool
	retention *retention.Pruner
}

// New returns the store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, retention: retention.New(pool)} }

// Mode is effectdtype.SingleNode.
func (s *Store) Mode() effectdtype.Storage { return effectdtype.SingleNode }

// Claim takes due intents in one statement (intentdb.Claim).
func (s *Store) Claim(ctx context.Context, run func(context.Context, func(query.TxDB) error) error, p intentdb.ClaimParams) (rows []intentdb.Claimed, avail float64, err error) {
	err = run(ctx, func(db query.TxDB) (err error) {
		rows, avail, err = intentdb.Claim(ctx, db, p)
		return err
	})
	return rows, avail, err
}

// Complete writes b (intentdb.Complete); every row is of bucket 0.
func (s *Store) Complete(ctx context.Context, db query.TxDB, b *intentdb.CompleteBatch, recheck bool, _ int64) ([]intentdb.Fenced, error) {
	return intentdb.Complete(ctx, db, b, recheck)
}

// TakeExpired takes expired leases in one statement (intentdb.TakeExpired).
func (s *Store) TakeExpired(ctx context.Context, run func(context.Context, func(query.TxDB) error) error, n int, channels []string, lease time.Duration) (taken []intentdb.Unsettled, err error) {
	err = run(ctx, func(db query.TxDB) (err error) {
		taken, err = intentdb.TakeExpired(ctx, db, n, channels, lease)
		return err
	})
	return taken, err
}

// Settle applies st (intentdb.Settle).
func (s *Store) Settle(ctx context.Context, db query.DB, st intentdb.SettleParams, _ int64) (bool, error) {
	return intentdb.Settle(ctx, db, st)
}

// EventIntent locks the event's intent (intentdb.EventIntent).
func (s *Store) EventIntent(ctx context.Context, tx pgx.Tx, channel string, o intentdb.EventObject) (intentdb.EventTarget, error) {
	return intentdb.EventIntent(ctx, tx, channel, o)
}

// SettleByEvent applies st (intentdb.SettleByEvent).
func (s *Store) SettleByEvent(ctx context.Context, tx pgx.Tx, _ intentdb.EventTarget, st intentdb.SettleByEventParams) (bool, error) {
	return intentdb.SettleByEvent(ctx, tx, st)
}

// SetDelivery applies c (intentdb.SetDelivery).
func (s *Store) SetDelivery(ctx context.Context, tx pgx.Tx, _ intentdb.EventTarget, c intentdb.DeliveryChange) (bool, error) {
	return intentdb.SetDelivery(ctx, tx, c)
}

// LockPolls takes the advisory lock that lets one instance at a time poll.
func (s *Store) LockPolls(ctx context.Context, conn query.DB) (unlock func(), ok bool, err error) {
	if got, err := query.TryLock(ctx, conn, pollLockKey); err != nil || !got {
		return nil, false, err
	}
	return func() { query.Unlock(context.WithoutCancel(ctx), conn, pollLockKey) }, true, nil
}

// PollDue lists the intents whose poll is due (intentdb.PollDue).
func (s *Store) PollDue(ctx context.Context, db query.DB, channel string, delays []time.Duration, limit int) ([]intentdb.DuePoll, error) {
	return intentdb.PollDue(ctx, db, channel, delays, limit)
}

// RecordPoll records p (intentdb.RecordPoll).
func (s *Store) RecordPoll(ctx context.Context, db query.DB, p intentdb.Poll, _ int64) (bool, error) {
	return intentdb.RecordPoll(ctx, db, p)
}

// Prune deletes channel's expired terminal intents in batches (intentdb.Prune).
func (s *Store) Prune(ctx context.Context, db query.DB, channel string, keep time.Duration, batch int) (int64, error) {
	return retention.InBatches(ctx, batch, func() (int64, error) { return intentdb.Prune(ctx, db, channel, batch, keep) })
}

// PruneDedupeKeys prunes the dedupe keys of every channel.
func (s *Store) PruneDedupeKeys(ctx context.Context, now time.Time) (int64, error) {
	return s.retention.PruneDedupeKeys(ctx, now, []*int{nil})
}

// DropExpiredPartitions detaches and forgets the expired partitions in one
// transaction under the three tables' locks (retention.Pruner.DropTogether),
// so that the sessions using the tables plan their statements again once, not
// at every step of every partition, and the checks of what is held see no row
// change; then it drops their tables (retention.Pruner.DropDetachedTables,
// which also drops any a crash left detached). When those locks are not free,
// it drops the partitions one by one (retention.Pruner.DropOneByOne).
func (s *Store) DropExpiredPartitions(ctx context.Context, horizon time.Duration) (dropped []retentiondb.Partition, held int, err error) {
	dropped, held, err = s.retention.DropTogether(ctx, horizon)
	if errors.Is(err, retentiondb.ErrPartitionBusy) {
		dropped, held, err = s.retention.DropOneByOne(ctx, horizon)
	}
	if err == nil {
		_, err = s.retention.DropDetachedTables(ctx)
	}
	return dropped, held, err
}

// FinishDetaches finishes the detaches a drop left half way
// (retention.Pruner.FinishDetaches).
func (s *Store) FinishDetaches(ctx context.Context) error { return s.retention.FinishDetaches(ctx) }
