package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// pruneLockKey lets one instance at a time prune.
const pruneLockKey = 0x65666670 // "effp"

// pruneBatch is how many rows one DELETE removes, so no statement holds many locks long.
const pruneBatch = 1000

// partitionSpan is how much time one day partition covers: a row waits up to
// that long past its retention for its partition to be dropped.
const partitionSpan = 24 * time.Hour

// partitionsAhead is how many UTC days after today the pruner keeps day
// partitions made for, so that a deployment whose pruner stops for that long
// still has somewhere to put new rows.
const partitionsAhead = 3

// pruner removes expired history every interval: day partitions whole, and
// the rows of channels that keep less than the longest retention, or less
// than a day, one by one.
type pruner struct {
	loop
	d        *Dispatcher
	interval time.Duration
}

// Start prunes every interval until Stop.
func (pr *pruner) Start(ctx context.Context) { pr.start(ctx, pr.run) }

// Stop cancels a prune in progress and waits for it.
func (pr *pruner) Stop() { pr.stop() }

func (pr *pruner) run(ctx context.Context) {
	every(ctx, pr.interval, nil, func() {
		if _, err := pr.prune(ctx); err != nil {
			pr.d.logDB(ctx, "pruning", err)
		}
	})
}

// prune makes the day partitions of the coming days, drops the partitions
// whose history has expired, and deletes, in small batches, the terminal
// intents (SENT, FAILED, SKIPPED, CANCELLED; never IN_DOUBT or a row in
// flight) of the channels whose retention is shorter than the longest or than
// a day (which a partition would keep up to 25 times too long), with their
// attempts, in both modes. Only one instance prunes at a time; the others return at
// once. It returns how many intents it deleted row by row.
func (pr *pruner) prune(ctx context.Context) (int64, error) {
	conn, err := pr.d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if got, err := query.TryLock(ctx, conn, pruneLockKey); err != nil || !got {
		return 0, err
	}
	defer query.Unlock(context.WithoutCancel(ctx), conn, pruneLockKey)
	_, until, err := query.AddPartitions(ctx, conn, partitionsAhead)
	if err != nil {
		return 0, err
	}
	pr.d.m.partitionsUntil.Set(float64(until.Unix()))
	horizon, ok, err := query.RetentionHorizon(ctx, conn)
	if err != nil || !ok {
		return 0, err
	}
	if err := pr.dropExpired(ctx, horizon); err != nil {
		return 0, err
	}
	if err := pr.pruneDedupeKeys(ctx); err != nil {
		return 0, err
	}
	var total int64
	for _, ch := range pr.d.chans {
		keep := ch.policy.Load().Retention.D()
		if keep >= horizon && keep >= partitionSpan {
			continue // its rows go with their partitions, at most a day late
		}
		n, err := pr.pruneChannel(ctx, conn, ch.Name, keep)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, ctx.Err()
}

// pruneChannel deletes, pruneBatch rows at a time, the terminal intents of
// channel last changed more than keep ago, and returns how many it deleted.
// In the distributed mode it goes bucket by bucket (query.PruneBucket): a
// statement that locked rows across shards would be refused.
func (pr *pruner) pruneChannel(ctx context.Context, db query.DB, channel string, keep time.Duration) (int64, error) {
	if pr.d.buckets == nil {
		return pruneInBatches(ctx, func() (int64, error) { return query.Prune(ctx, db, channel, pruneBatch, keep) })
	}
	var total int64
	for b := range pr.d.buckets.buckets {
		n, err := pruneInBatches(ctx, func() (int64, error) { return query.PruneBucket(ctx, db, channel, pruneBatch, keep, b) })
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneInBatches runs batch until it deletes fewer than pruneBatch rows or
// ctx ends, and returns how many rows it deleted.
func pruneInBatches(ctx context.Context, batch func() (int64, error)) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := batch()
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
	return total, ctx.Err()
}

// dropExpired drops the day partitions that ended more than horizon ago,
// except an intents partition that still holds a live row or one changed
// within the horizon (counted in effectd_retention_held_partitions).
func (pr *pruner) dropExpired(ctx context.Context, horizon time.Duration) error {
	var dropped []query.Partition
	held := 0
	err := query.FinishDetaches(ctx, pr.d.pool)
	if err == nil {
		dropped, held, err = DropExpiredPartitions(ctx, pr.d.pool, pr.d.Storage(), horizon)
	}
	for _, p := range dropped {
		pr.d.m.partitionsDropped.WithLabelValues(p.Parent).Inc()
		pr.d.log.Info("dropped an expired day partition", "partition", p.Name, "until", p.Upper.Time)
	}
	if errors.Is(err, query.ErrPartitionBusy) {
		pr.d.m.partitionsBusy.Inc()
		pr.d.log.Info("an expired day partition stays until the next prune", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	pr.d.m.partitionsHeld.Set(float64(held))
	return nil
}

// dropTogetherTries is how many times DropExpiredPartitions tries to take
// the partitioned tables' locks at once (query.DropTogether) before it drops
// the partitions one at a time, concurrently.
const dropTogetherTries = 3

// DropExpiredPartitions drops, as the pruner does, the day partitions that
// ended more than horizon ago: intents first, each unless it holds a live row
// or one changed within the horizon (then it is held); then the attempts and
// provider events partitions no intents partition left may need. It returns
// the partitions dropped and how many intents partitions were held.
//
// On one PostgreSQL it detaches and forgets them all in one transaction under
// the three tables' locks (query.DropTogether), so that the sessions using
// the tables plan their statements again once, not at every step of every
// partition, and the checks of what is held see no row change; then it drops
// their tables (query.DropDetachedTables, which also drops any a crash left
// detached). When those locks are not free (a transaction holding one for
// longer than query.PartitionLockWait, dropTogetherTries times), and always
// in the distributed mode (Citus detaches a partition of a distributed table
// only plainly, on every shard), each partition is detached and dropped on
// its own, concurrently where PostgreSQL allows it (query.DropPartition).
// The first check of an intents partition is then made while writers still
// reach it; query.DropPartition checks it again in the transaction that drops
// it, once none can, and keeps it (counted held) when a row became live in
// between.
func DropExpiredPartitions(ctx context.Context, pool *pgxpool.Pool, mode effectdtype.Storage, horizon time.Duration) (dropped []query.Partition, held int, err error) {
	oneByOne := func(p query.Partition) error {
		if checked, ok := ctx.Value(partitionCheckedKey{}).(func(query.Partition)); ok {
			checked(p) // a test's change between the first check and the drop
		}
		return query.DropPartition(ctx, pool, p, horizon)
	}
	if mode == effectdtype.Citus {
		err = dropEach(ctx, pool, horizon, oneByOne, &dropped, &held)
		return dropped, held, err
	}
	dropped, held, err = dropTogether(ctx, pool, horizon)
	if errors.Is(err, query.ErrPartitionBusy) {
		dropped, held = nil, 0
		err = dropEach(ctx, pool, horizon, oneByOne, &dropped, &held)
	}
	if err == nil {
		_, err = query.DropDetachedTables(ctx, pool)
	}
	return dropped, held, err
}

// dropTogether detaches and forgets in one transaction (query.DropTogether)
// what dropEach would drop, after a dry run on pool: the tables' locks stop
// every producer for a moment, and are not taken at a prune that has nothing
// to drop. The tables detached are left to query.DropDetachedTables.
func dropTogether(ctx context.Context, pool *pgxpool.Pool, horizon time.Duration) (dropped []query.Partition, held int, err error) {
	var none []query.Partition
	if err := dropEach(ctx, pool, horizon, func(query.Partition) error { return errSomething }, &none, &held); !errors.Is(err, errSomething) {
		return nil, held, err
	}
	err = query.DropTogether(ctx, pool, dropTogetherTries, func(tx pgx.Tx) error {
		dropped, held = nil, 0 // a try that gave up changed nothing
		return dropEach(ctx, tx, horizon, func(p query.Partition) error { return query.DetachForget(ctx, tx, p) }, &dropped, &held)
	})
	return dropped, held, err
}

// errSomething stops a dry run of dropEach at the first partition it would
// drop.
var errSomething = errors.New("a partition to drop")

// partitionCheckedKey keys, in a test's context, a func(query.Partition)
// that DropExpiredPartitions calls between the first check of a partition it
// drops one by one and its drop.
type partitionCheckedKey struct{}

// dropEach lists on db the partitions that ended more than horizon ago and
// drops each with drop, intents first and each unless it is held, then the
// attempts and provider events partitions the intents left allow, adding
// them to dropped and the intents partitions held (by this check, or by
// drop's own: query.ErrPartitionLive) to held.
func dropEach(ctx context.Context, db query.DB, horizon time.Duration, drop func(query.Partition) error, dropped *[]query.Partition, held *int) error {
	for _, intents := range []bool{true, false} {
		expired, err := query.ExpiredPartitions(ctx, db, horizon)
		if err != nil {
			return err
		}
		for _, p := range expired {
			if (p.Parent == "intents") != intents {
				continue
			}
			if intents {
				keep, err := query.PartitionHeld(ctx, db, p.Name, horizon)
				if err != nil {
					return err
				}
				if keep {
					*held++
					continue
				}
			}
			err := drop(p)
			if errors.Is(err, query.ErrPartitionLive) {
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
