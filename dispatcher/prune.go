package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
)

// pruneLockKey lets one instance at a time prune.
const pruneLockKey = 0x65666670 // "effp"

// pruneBatch is how many rows one DELETE removes, so no statement holds many locks long.
const pruneBatch = 1000

// pruner deletes terminal intents past their channel's retention every
// interval.
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

// prune deletes terminal intents (SENT, FAILED, SKIPPED, CANCELLED; never
// IN_DOUBT or a row in flight) older than their channel's retention, with their
// attempts, in small batches. Only one instance prunes at a time; the others
// return at once. It returns how many intents it deleted.
func (pr *pruner) prune(ctx context.Context) (int64, error) {
	conn, err := pr.d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, query.TryLock, pruneLockKey).Scan(&got); err != nil || !got {
		return 0, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), query.Unlock, pruneLockKey)
	var total int64
	for _, ch := range pr.d.chans {
		keep := ch.policy.Load().Retention.D()
		for ctx.Err() == nil {
			tag, err := conn.Exec(ctx, query.Prune, ch.Name, pruneBatch, pgtype.Interval{Microseconds: keep.Microseconds(), Valid: true})
			if err != nil {
				return total, err
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < pruneBatch {
				break
			}
		}
	}
	return total, ctx.Err()
}
