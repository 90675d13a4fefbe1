package dispatcher

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
)

// pruneLockKey lets one instance at a time prune.
const pruneLockKey = 0x65666670 // "effp"

// pruneBatch is how many rows one DELETE removes, so no statement holds many locks long.
const pruneBatch = 1000

func (d *Dispatcher) pruneLoop(ctx context.Context) {
	every(ctx, d.cfg.PruneInterval, nil, func() {
		if _, err := d.Prune(ctx); err != nil {
			d.logDB(ctx, "pruning", err)
		}
	})
}

// Prune deletes terminal intents (SENT, FAILED, SKIPPED, CANCELLED; never
// IN_DOUBT or a row in flight) older than their channel's retention, with their
// attempts, in small batches. Only one instance prunes at a time; the others
// return at once. It returns how many intents it deleted.
func (d *Dispatcher) Prune(ctx context.Context) (int64, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, pruneLockKey).Scan(&got); err != nil || !got {
		return 0, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, pruneLockKey)
	var total int64
	for _, ch := range d.chans {
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

// logDB logs a database error unless the dispatcher is stopping.
func (d *Dispatcher) logDB(ctx context.Context, op string, err error, args ...any) {
	if ctx.Err() != nil {
		return
	}
	d.log.Warn(op, append(args, "error", err)...)
}
