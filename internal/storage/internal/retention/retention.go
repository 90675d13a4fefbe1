package retention

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/retentiondb"
)

// InBatches runs batch until it deletes fewer than size rows or ctx ends,
// and returns how many rows it deleted.
func InBatches(ctx context.Context, size int, batch func() (int64, error)) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := batch()
		total += n
		if err != nil || n < int64(size) {
			return total, err
		}
	}
	return total, ctx.Err()
}

// Pruner removes what retention lets go from the database behind its pool:
// dedupe keys and expired day partitions, each step waiting for its locks no
// longer than LockWait at a time.
type Pruner struct {
	pool *pgxpool.Pool
}

// New returns a Pruner working on pool.
func New(pool *pgxpool.Pool) *Pruner { return &Pruner{pool: pool} }

// dedupeKeysBatch is how many dedupe keys one DELETE removes.
const dedupeKeysBatch = 10000

// PruneDedupeKeys deletes the dedupe keys (migration 017) whose channel's
// horizon ended before today (UTC) and whose intents partition is gone, a
// batch at a time, in each of scopes (a bucket's shard, or nil: every row),
// and returns how many it deleted. A key outlives its intent: while the
// oldest intents partition remains (held by a live row, say), the keys of its
// days and later stay.
func (r *Pruner) PruneDedupeKeys(ctx context.Context, now time.Time, scopes []*int) (int64, error) {
	bound, ok, err := retentiondb.DedupeKeysBound(ctx, r.pool)
	if err != nil || !ok {
		return 0, err
	}
	today := now.UTC().Truncate(24 * time.Hour)
	var total int64
	for _, bucket := range scopes {
		n, err := InBatches(ctx, dedupeKeysBatch, func() (int64, error) {
			return retentiondb.PruneDedupeKeys(ctx, r.pool, today, bound, dedupeKeysBatch, bucket)
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// dropTogetherTries is how many times DropTogether tries to take the
// partitioned tables' locks at once (retentiondb.LockParents) before it gives up
// with retentiondb.ErrPartitionBusy: the lock of each partition detached waits as
// long (autovacuum may hold one), the parents' held meanwhile.
const dropTogetherTries = 3

// partitionCheckedKey keys, in a test's context, a func(retentiondb.Partition)
// that DropOneByOne calls between the first check of a partition and its drop.
type partitionCheckedKey struct{}

// WithPartitionChecked returns ctx carrying f for DropOneByOne.
func WithPartitionChecked(ctx context.Context, f func(retentiondb.Partition)) context.Context {
	return context.WithValue(ctx, partitionCheckedKey{}, f)
}

// DropOneByOne drops the partitions that ended more than horizon ago each on
// its own, concurrently where PostgreSQL allows it (retentiondb.DropPartition,
// under withLockWait). The first check of an intents partition is made while
// writers still reach it; retentiondb.DropPartition checks it again in the
// transaction that drops it, once none can, and keeps it (counted held) when
// a row became live in between.
func (r *Pruner) DropOneByOne(ctx context.Context, horizon time.Duration) (dropped []retentiondb.Partition, held int, err error) {
	err = dropEach(ctx, r.pool, horizon, func(p retentiondb.Partition) error {
		if checked, ok := ctx.Value(partitionCheckedKey{}).(func(retentiondb.Partition)); ok {
			checked(p) // a test's change between the first check and the drop
		}
		return r.dropPartition(ctx, p, horizon)
	}, &dropped, &held)
	return dropped, held, err
}

// dropPartition drops p (retentiondb.DropPartition) under withLockWait.
func (r *Pruner) dropPartition(ctx context.Context, p retentiondb.Partition, horizon time.Duration) error {
	return r.withLockWait(ctx, p.Name, LockTries, func(conn *pgx.Conn) error {
		return retentiondb.DropPartition(ctx, conn, p, horizon)
	})
}

// DropTogether detaches and forgets in one transaction what DropOneByOne
// would drop, after a dry run: the transaction first takes the partitioned
// tables' locks (retentiondb.LockParents, under withLockWait), which stop every
// producer for a moment, and are not taken at a prune that has nothing to
// drop. The tables detached are left to DropDetachedTables. It returns
// retentiondb.ErrPartitionBusy when the locks were not free.
func (r *Pruner) DropTogether(ctx context.Context, horizon time.Duration) (dropped []retentiondb.Partition, held int, err error) {
	var none []retentiondb.Partition
	if err := dropEach(ctx, r.pool, horizon, func(retentiondb.Partition) error { return errSomething }, &none, &held); !errors.Is(err, errSomething) {
		return nil, held, err
	}
	err = r.withLockWait(ctx, "intents, attempts and provider_events together", dropTogetherTries, func(conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := retentiondb.LockParents(ctx, tx); err != nil {
				return err
			}
			dropped, held = nil, 0 // a try that gave up changed nothing
			return dropEach(ctx, tx, horizon, func(p retentiondb.Partition) error { return retentiondb.DetachForget(ctx, tx, p) }, &dropped, &held)
		})
	})
	return dropped, held, err
}

// errSomething stops a dry run of dropEach at the first partition it would
// drop.
var errSomething = errors.New("a partition to drop")

// dropEach lists on db the partitions that ended more than horizon ago and
// drops each with drop, intents first and each unless it is held, then the
// attempts and provider events partitions the intents left allow, adding
// them to dropped and the intents partitions held (by this check, or by
// drop's own: retentiondb.ErrPartitionLive) to held.
func dropEach(ctx context.Context, db query.DB, horizon time.Duration, drop func(retentiondb.Partition) error, dropped *[]retentiondb.Partition, held *int) error {
	for _, intents := range []bool{true, false} {
		expired, err := retentiondb.ExpiredPartitions(ctx, db, horizon)
		if err != nil {
			return err
		}
		for _, p := range expired {
			if (p.Parent == "intents") != intents {
				continue
			}
			if intents {
				keep, err := retentiondb.PartitionHeld(ctx, db, p.Name, horizon)
				if err != nil {
					return err
				}
				if keep {
					*held++
					continue
				}
			}
			err := drop(p)
			if errors.Is(err, retentiondb.ErrPartitionLive) {
				*held++
				continue
			}
			if err != nil {
				return err
			}
			*dropped = append(*dropped, p)
		}
	}
	return nil
}
