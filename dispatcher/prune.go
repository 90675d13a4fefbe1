package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/retentiondb"
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
	_, until, err := retentiondb.AddPartitions(ctx, conn, partitionsAhead)
	if err != nil {
		return 0, err
	}
	pr.d.m.partitionsUntil.Set(float64(until.Unix()))
	horizon, ok, err := retentiondb.RetentionHorizon(ctx, conn)
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
// channel last changed more than keep ago (storage.Engine.Prune), and returns
// how many it deleted.
func (pr *pruner) pruneChannel(ctx context.Context, db query.DB, channel string, keep time.Duration) (int64, error) {
	return pr.d.store.Prune(ctx, db, channel, keep, pruneBatch)
}

// dropExpired drops the day partitions that ended more than horizon ago,
// except an intents partition that still holds a live row or one changed
// within the horizon (counted in effectd_retention_held_partitions).
func (pr *pruner) dropExpired(ctx context.Context, horizon time.Duration) error {
	var dropped []retentiondb.Partition
	held := 0
	err := pr.d.store.FinishDetaches(ctx)
	if err == nil {
		dropped, held, err = pr.d.store.DropExpiredPartitions(ctx, horizon)
	}
	for _, p := range dropped {
		pr.d.m.partitionsDropped.WithLabelValues(p.Parent).Inc()
		pr.d.log.Info("dropped an expired day partition", "partition", p.Name, "until", p.Upper.Time)
	}
	if errors.Is(err, retentiondb.ErrPartitionBusy) {
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
