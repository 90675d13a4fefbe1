package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query/retentiondb"
)

// LockWait bounds how long a detach or a drop waits for its lock on a
// partition (lock_timeout). While such a lock waits, the sessions that ask
// for a lock on the partition after it queue behind it: during a prune under
// load, enqueues were seen waiting for a relation lock behind a detach that
// waited for its own (docs/scale.md). A step that does not get its lock in
// time gives up, having changed nothing or left a detach to finish, and is
// tried again after LockPause, LockTries times in all; then it returns
// retentiondb.ErrPartitionBusy, no session having waited behind it longer than
// LockWait at a time.
const (
	LockWait  = 50 * time.Millisecond
	LockTries = 20
	LockPause = 150 * time.Millisecond
)

// withLockWait runs step on one connection of the pool with lock_timeout set
// to LockWait, and again after LockPause while it fails for a lock that was
// not free, tries times in all; then it returns retentiondb.ErrPartitionBusy for
// name.
func (r *Pruner) withLockWait(ctx context.Context, name string, tries int, step func(*pgx.Conn) error) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, LockWait.Milliseconds())); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // not back to the pool with the setting
		}
	}()
	for try := 1; ; try++ {
		err := step(conn.Conn())
		if !retentiondb.LockNotFree(err) {
			return err
		}
		if try >= tries {
			return fmt.Errorf("%s: %w", name, retentiondb.ErrPartitionBusy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(LockPause):
		}
	}
}

// DropDetachedTables drops the tables DropTogether detached and left
// (retentiondb.DetachedTables), each in a transaction of its own under withLockWait,
// and returns their names.
func (r *Pruner) DropDetachedTables(ctx context.Context) ([]string, error) {
	names, err := retentiondb.DetachedTables(ctx, r.pool)
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if err := r.withLockWait(ctx, name, LockTries, func(conn *pgx.Conn) error {
			return retentiondb.DropTable(ctx, conn, name)
		}); err != nil {
			return names[:i], err
		}
	}
	return names, nil
}

// FinishDetaches finishes the detaches that stopped half way, so their
// partitions can be dropped (retentiondb.PendingDetaches, retentiondb.FinishDetach), then
// attaches again each intents partition DropOneByOne detached without
// deciding on it (retentiondb.UndecidedPartitions): no writer reaches its rows
// while it is detached, and the prune's check of what is held would skip it.
// Each step waits for its locks under withLockWait.
func (r *Pruner) FinishDetaches(ctx context.Context) error {
	pending, err := retentiondb.PendingDetaches(ctx, r.pool)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pending {
		errs = append(errs, r.withLockWait(ctx, p.Name, LockTries, func(conn *pgx.Conn) error {
			return retentiondb.FinishDetach(ctx, conn, p)
		}))
	}
	undecided, err := retentiondb.UndecidedPartitions(ctx, r.pool)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, p := range undecided {
		errs = append(errs, r.withLockWait(ctx, p.Name, LockTries, func(conn *pgx.Conn) error {
			return retentiondb.Attach(ctx, conn, p)
		}))
	}
	return errors.Join(errs...)
}
