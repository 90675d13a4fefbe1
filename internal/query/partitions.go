package query

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed add_partitions.sql
var addPartitionsSQL string

//go:embed partition_attached.sql
var partitionAttachedSQL string

//go:embed retention_horizon.sql
var retentionHorizonSQL string

//go:embed partitions_expired.sql
var partitionsExpiredSQL string

//go:embed partition_held.sql
var partitionHeldSQL string

//go:embed partition_forget.sql
var partitionForgetSQL string

//go:embed partitions_pending.sql
var partitionsPendingSQL string

//go:embed partitions_lock_parents.sql
var partitionsLockParentsSQL string

//go:embed partitions_detached_left.sql
var partitionsDetachedLeftSQL string

//go:embed partitions_detached_registered.sql
var partitionsDetachedRegisteredSQL string

// Partition is one day partition of intents, attempts or provider_events, as
// effectd.partitions lists it. Lower is -infinity for <table>_p0, the table a
// deployment had before partitions.
type Partition struct {
	Name, Parent string
	Lower, Upper pgtype.Timestamptz
}

// AddPartitions makes the partitions of the three tables for the UTC days from
// today to today + ahead that have none, and returns how many it made and
// when the last intents partition ends: an intent created after that has no
// partition to go to, and its enqueue fails.
func AddPartitions(ctx context.Context, db DB, ahead int) (made int, until time.Time, err error) {
	err = db.QueryRow(ctx, addPartitionsSQL, ahead).Scan(&made, &until)
	return made, until, err
}

// RetentionHorizon is the longest retention of any registered channel; ok is
// false when no channel is registered.
func RetentionHorizon(ctx context.Context, db DB) (horizon time.Duration, ok bool, err error) {
	var iv pgtype.Interval
	if err := db.QueryRow(ctx, retentionHorizonSQL).Scan(&iv); err != nil || !iv.Valid {
		return 0, false, err
	}
	return time.Duration(iv.Microseconds+int64(iv.Days)*24*3600e6+int64(iv.Months)*30*24*3600e6) * time.Microsecond, true, nil
}

// ExpiredPartitions lists the partitions that ended at least horizon ago,
// oldest first; attempts and provider events only once no intents partition
// they may belong to is left.
func ExpiredPartitions(ctx context.Context, db DB, horizon time.Duration) ([]Partition, error) {
	rows, err := db.Query(ctx, partitionsExpiredSQL, interval(horizon))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Partition])
}

// PartitionHeld says whether intents partition name must stay: it holds a live
// row (PENDING, SENDING, IN_DOUBT) or one changed less than horizon ago.
func PartitionHeld(ctx context.Context, db DB, name string, horizon time.Duration) (held bool, err error) {
	sql := strings.ReplaceAll(partitionHeldSQL, "effectd.partition ", pgx.Identifier{"effectd", name}.Sanitize()+" ")
	err = db.QueryRow(ctx, sql, interval(horizon)).Scan(&held)
	return held, err
}

// PartitionLockWait bounds how long a detach or a drop waits for its lock on
// a partition (lock_timeout). While such a lock waits, the sessions that ask
// for a lock on the partition after it queue behind it: during a prune under
// load, enqueues were seen waiting for a relation lock behind a detach that
// waited for its own (docs/scale.md). A step that does not get its lock in
// time gives up, having changed nothing or left a detach to finish, and is
// tried again after PartitionLockPause, PartitionLockTries times in all.
const (
	PartitionLockWait  = 50 * time.Millisecond
	PartitionLockTries = 20
	PartitionLockPause = 150 * time.Millisecond
)

// ErrPartitionBusy says a detach or a drop gave up on a partition whose lock
// it did not get within PartitionLockWait in PartitionLockTries tries. No
// session waited behind it longer than PartitionLockWait at a time; the next
// prune tries again.
var ErrPartitionBusy = errors.New("partition busy: its lock was not free in time; the next prune tries again")

// DropPartition detaches p from its parent without stopping the parent's
// readers and writers (DETACH PARTITION … CONCURRENTLY, which waits for the
// transactions that may use it; a plain DETACH for intents and attempts in
// the distributed mode, see partition_attached.sql), then drops it and
// forgets it in one transaction: its registry row and, for intents, the
// settled counts of its days. No step waits for a lock longer than
// PartitionLockWait; one that would is tried again (ErrPartitionBusy when it
// never got it). A detach that stopped half way (a crash, a cancelled
// context, a lock not free) is finished by the next call, or by
// FinishDetaches.
//
// An intents partition is dropped only if it still holds no live row and
// none changed within horizon (PartitionHeld) once no writer can reach its
// rows, checked in the transaction that drops it: after a CONCURRENTLY
// detach it is no partition any more; a plain detach runs in that
// transaction, whose lock on the parent (ACCESS EXCLUSIVE, on every shard in
// the distributed mode) keeps every writer out until the commit. A row made
// live between the caller's first check and the detach (an operator's
// requeue, a reconcile, a late provider event) keeps it: the plain detach is
// rolled back, a concurrent one undone by attaching the table again, and
// DropPartition returns ErrPartitionLive.
func DropPartition(ctx context.Context, pool *pgxpool.Pool, p Partition, horizon time.Duration) error {
	return withLockWait(ctx, pool, p.Name, PartitionLockTries, func(conn *pgx.Conn) error { return dropPartition(ctx, conn, p, horizon) })
}

// ErrPartitionLive says DropPartition kept an intents partition attached: once
// no writer could reach it, it held a live row or one changed within the
// horizon.
var ErrPartitionLive = errors.New("partition kept: it holds a live or recent row")

// errKeepDetach rolls back a plain detach whose partition holds a live row.
var errKeepDetach = errors.New("keep the partition attached")

// withLockWait runs step on one connection of pool with lock_timeout set to
// PartitionLockWait, and again after PartitionLockPause while it fails for a
// lock that was not free, tries times in all; then it returns
// ErrPartitionBusy for name.
func withLockWait(ctx context.Context, pool *pgxpool.Pool, name string, tries int, step func(*pgx.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, PartitionLockWait.Milliseconds())); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // not back to the pool with the setting
		}
	}()
	for try := 1; ; try++ {
		err := step(conn.Conn())
		if !lockNotFree(err) {
			return err
		}
		if try >= tries {
			return fmt.Errorf("%s: %w", name, ErrPartitionBusy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(PartitionLockPause):
		}
	}
}

// DropTogether runs step in one transaction that first takes the three
// partitioned tables' ACCESS EXCLUSIVE locks (partitions_lock_parents.sql),
// waiting at most PartitionLockWait for them, and tries again after
// PartitionLockPause while they, or a lock step asks for, are not free,
// tries times in all; then it returns ErrPartitionBusy. step may detach and
// forget any partition of them with DetachForget, and sees nothing change in
// them while it runs; DropDetachedTables then drops the detached tables.
//
// Each detach or drop of a partition makes every session plan again each
// statement it has cached that reads the partitioned table: DETACH …
// CONCURRENTLY twice a partition (its two transactions), so that a day's
// partitions of three tables dropped one by one made every producer's
// connection, the claimer and each completer plan over every day partition
// about ten times within a second or two (in PostgreSQL's log, under the live
// load of the scale bench: enqueues of 40–165 ms, claims bound in 110–222 ms
// after each step). Detached together they are one change: each statement is
// planned again once. The price is the lock: while it waits for the
// transactions that use the tables (at most PartitionLockWait a try), and
// while step runs, every new statement on them waits behind it; so step only
// detaches (catalog rows), and the tables' files go after the commit.
func DropTogether(ctx context.Context, pool *pgxpool.Pool, tries int, step func(tx pgx.Tx) error) error {
	// the lock of each partition detached waits as long (autovacuum may hold
	// one), the parents' held meanwhile
	return withLockWait(ctx, pool, "intents, attempts and provider_events together", tries, func(conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, partitionsLockParentsSQL); err != nil {
				return err
			}
			return step(tx)
		})
	})
}

// DetachForget detaches partition p plainly in tx, which holds its parent's
// ACCESS EXCLUSIVE lock (DropTogether), unless it is detached already, and
// forgets it as DropPartition does: its registry row and, for intents, the
// settled counts of its days. Its table stays until DropDetachedTables.
func DetachForget(ctx context.Context, tx pgx.Tx, p Partition) error {
	if _, err := detach(ctx, tx, p, false); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, partitionForgetSQL, p.Name, p.Parent, p.Lower, p.Upper)
	return err
}

// detach detaches p from its parent on db unless it is detached already:
// it finishes a detach left pending (FINALIZE); else, when concurrently says
// so, it detaches CONCURRENTLY if the parent allows it and leaves p attached
// if not; else it detaches plainly (partition_attached.sql). Citus refuses
// DETACH … CONCURRENTLY on a distributed table: there a plain detach takes
// its lock on every shard of the parent. plainly says it detached p plainly,
// in db's transaction if db is one.
func detach(ctx context.Context, db DB, p Partition, concurrently bool) (plainly bool, err error) {
	table := pgx.Identifier{"effectd", p.Name}.Sanitize()
	var attached, pending, allowed bool
	if err := db.QueryRow(ctx, partitionAttachedSQL, table, p.Parent).Scan(&attached, &pending, &allowed); err != nil || !attached {
		return false, err
	}
	how := ""
	switch {
	case pending:
		how = " FINALIZE"
	case concurrently && allowed:
		how = " CONCURRENTLY"
	case concurrently:
		return false, nil
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s%s`, pgx.Identifier{"effectd", p.Parent}.Sanitize(), table, how)); err != nil {
		return false, fmt.Errorf("detach %s: %w", p.Name, err)
	}
	return how == "", nil
}

// attach attaches p's table to its parent again, with its bounds, on db.
// After a detach … CONCURRENTLY the table carries a CHECK constraint equal
// to its bounds, so the attach does not read its rows; it locks the parent
// SHARE UPDATE EXCLUSIVE, which lets its readers and writers go on.
func attach(ctx context.Context, db DB, p Partition) error {
	bound := func(t pgtype.Timestamptz) string {
		switch t.InfinityModifier {
		case pgtype.NegativeInfinity:
			return "MINVALUE"
		case pgtype.Infinity:
			return "MAXVALUE"
		}
		return "'" + t.Time.UTC().Format(time.RFC3339Nano) + "'"
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)`,
		pgx.Identifier{"effectd", p.Parent}.Sanitize(), pgx.Identifier{"effectd", p.Name}.Sanitize(), bound(p.Lower), bound(p.Upper))); err != nil {
		return fmt.Errorf("attach %s again: %w", p.Name, err)
	}
	return nil
}

// DropDetachedTables drops the tables DetachForget left (partitions_detached_left.sql),
// each in a transaction of its own under the same bounded lock wait as
// DropPartition, and returns their names. None is a partition any more, so
// dropping them makes no session plan again.
func DropDetachedTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, partitionsDetachedLeftSQL)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if err := withLockWait(ctx, pool, name, PartitionLockTries, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{"effectd", name}.Sanitize())
			return err
		}); err != nil {
			return names[:i], err
		}
	}
	return names, nil
}

// dropPartition is one try of DropPartition on conn: a detach CONCURRENTLY
// (outside a transaction, as PostgreSQL wants it) where the parent allows
// it, then one transaction that detaches p plainly if it is still attached,
// checks an intents partition (PartitionHeld) and drops and forgets p, or
// keeps it: the plain detach rolled back, a concurrent one undone by attach.
func dropPartition(ctx context.Context, conn *pgx.Conn, p Partition, horizon time.Duration) error {
	if _, err := detach(ctx, conn, p, true); err != nil {
		return err
	}
	kept := false
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		plainly, err := detach(ctx, tx, p, false)
		if err != nil {
			return err
		}
		if p.Parent == "intents" {
			// no writer reaches the rows now: this check decides
			held, err := PartitionHeld(ctx, tx, p.Name, horizon)
			if err != nil {
				return err
			}
			if held {
				kept = true
				if plainly {
					return errKeepDetach // the rollback undoes the detach
				}
				return attach(ctx, tx, p)
			}
		}
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{"effectd", p.Name}.Sanitize()); err != nil {
			return fmt.Errorf("drop %s: %w", p.Name, err)
		}
		_, err = tx.Exec(ctx, partitionForgetSQL, p.Name, p.Parent, p.Lower, p.Upper)
		return err
	})
	if errors.Is(err, errKeepDetach) {
		err = nil
	}
	if err == nil && kept {
		return fmt.Errorf("%s: %w", p.Name, ErrPartitionLive)
	}
	return err
}

// lockNotFree says err is a lock that was not free within lock_timeout.
func lockNotFree(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// FinishDetaches finishes the detaches that stopped half way, so their
// partitions can be dropped (PostgreSQL detaches no other partition of a
// parent CONCURRENTLY while one is pending), then attaches again each
// intents partition DropPartition detached without deciding on it
// (partitions_detached_registered.sql): no writer reaches its rows while it
// is detached, and the prune's check of what is held would skip it. Each
// step waits for its locks as DropPartition does.
func FinishDetaches(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, partitionsPendingSQL)
	if err != nil {
		return err
	}
	type pending struct{ Name, Parent string }
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pending])
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range list {
		errs = append(errs, withLockWait(ctx, pool, p.Name, PartitionLockTries, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s FINALIZE`,
				pgx.Identifier{"effectd", p.Parent}.Sanitize(), pgx.Identifier{"effectd", p.Name}.Sanitize()))
			return err
		}))
	}
	rows, err = pool.Query(ctx, partitionsDetachedRegisteredSQL)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	undecided, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Partition])
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, p := range undecided {
		errs = append(errs, withLockWait(ctx, pool, p.Name, PartitionLockTries, func(conn *pgx.Conn) error {
			return attach(ctx, conn, p)
		}))
	}
	return errors.Join(errs...)
}
