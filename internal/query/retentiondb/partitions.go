package retentiondb

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

	"github.com/effectd/effectd/internal/query"
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
	Name   string             `db:"name"`
	Parent string             `db:"parent"`
	Lower  pgtype.Timestamptz `db:"lower"`
	Upper  pgtype.Timestamptz `db:"upper"`
}

// AddPartitions makes the partitions of the three tables for the UTC days from
// today to today + ahead that have none, and returns how many it made and
// when the last intents partition ends: an intent created after that has no
// partition to go to, and its enqueue fails.
func AddPartitions(ctx context.Context, db query.DB, ahead int) (made int, until time.Time, err error) {
	err = db.QueryRow(ctx, addPartitionsSQL, ahead).Scan(&made, &until)
	return made, until, err
}

// RetentionHorizon is the longest retention of any registered channel; ok is
// false when no channel is registered.
func RetentionHorizon(ctx context.Context, db query.DB) (horizon time.Duration, ok bool, err error) {
	var iv pgtype.Interval
	if err := db.QueryRow(ctx, retentionHorizonSQL).Scan(&iv); err != nil || !iv.Valid {
		return 0, false, err
	}
	return time.Duration(iv.Microseconds+int64(iv.Days)*24*3600e6+int64(iv.Months)*30*24*3600e6) * time.Microsecond, true, nil
}

// ExpiredPartitions lists the partitions that ended at least horizon ago,
// oldest first; attempts and provider events only once no intents partition
// they may belong to is left.
func ExpiredPartitions(ctx context.Context, db query.DB, horizon time.Duration) ([]Partition, error) {
	rows, err := db.Query(ctx, partitionsExpiredSQL, query.Interval(horizon))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Partition])
}

// PartitionHeld says whether intents partition name must stay: it holds a live
// row (PENDING, SENDING, IN_DOUBT) or one changed less than horizon ago.
func PartitionHeld(ctx context.Context, db query.DB, name string, horizon time.Duration) (held bool, err error) {
	sql := strings.ReplaceAll(partitionHeldSQL, "effectd.partition ", pgx.Identifier{"effectd", name}.Sanitize()+" ")
	err = db.QueryRow(ctx, sql, query.Interval(horizon)).Scan(&held)
	return held, err
}

// ErrPartitionBusy says a detach or a drop gave up on a partition whose lock
// was not free in time (the retention steps bound each wait with
// lock_timeout and try a few times); the next prune tries again.
var ErrPartitionBusy = errors.New("partition busy: its lock was not free in time; the next prune tries again")

// DropPartition detaches p from its parent on conn without stopping the
// parent's readers and writers (DETACH PARTITION … CONCURRENTLY, which waits
// for the transactions that may use it; a plain DETACH for intents and
// attempts in the distributed mode, see partition_attached.sql), then drops
// it and forgets it in one transaction: its registry row and, for intents,
// the settled counts of its days. conn is in no transaction; each step waits
// for its locks as long as conn's lock_timeout lets it, and a lock not free
// in time fails the call (LockNotFree), to be tried again. A detach that
// stopped half way (a crash, a cancelled context, a lock not free) is
// finished by the next call, or by FinishDetach.
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
func DropPartition(ctx context.Context, conn *pgx.Conn, p Partition, horizon time.Duration) error {
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
				return Attach(ctx, tx, p)
			}
		}
		if err := DropTable(ctx, tx, p.Name); err != nil {
			return err
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

// ErrPartitionLive says DropPartition kept an intents partition attached: once
// no writer could reach it, it held a live row or one changed within the
// horizon.
var ErrPartitionLive = errors.New("partition kept: it holds a live or recent row")

// errKeepDetach rolls back a plain detach whose partition holds a live row.
var errKeepDetach = errors.New("keep the partition attached")

// LockParents takes in tx the three partitioned tables' ACCESS EXCLUSIVE
// locks (partitions_lock_parents.sql), so that tx may detach and forget any
// partition of them with DetachForget and sees nothing change in them while
// it runs.
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
// transactions that use the tables, and while tx runs, every new statement on
// them waits behind it; so tx only detaches (catalog rows), and the tables'
// files go after the commit (DetachedTables, DropTable).
func LockParents(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, partitionsLockParentsSQL)
	return err
}

// DetachForget detaches partition p plainly in tx, which holds its parent's
// ACCESS EXCLUSIVE lock (LockParents), unless it is detached already, and
// forgets it as DropPartition does: its registry row and, for intents, the
// settled counts of its days. Its table stays until DropTable.
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
func detach(ctx context.Context, db query.DB, p Partition, concurrently bool) (plainly bool, err error) {
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

// Attach attaches p's table to its parent again, with its bounds, on db.
// After a detach … CONCURRENTLY the table carries a CHECK constraint equal
// to its bounds, so the attach does not read its rows; it locks the parent
// SHARE UPDATE EXCLUSIVE, which lets its readers and writers go on.
func Attach(ctx context.Context, db query.DB, p Partition) error {
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

// DetachedTables lists the tables DetachForget left and no one dropped yet
// (partitions_detached_left.sql). None is a partition any more, so dropping
// them makes no session plan again.
func DetachedTables(ctx context.Context, db query.DB) ([]string, error) {
	rows, err := db.Query(ctx, partitionsDetachedLeftSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// DropTable drops effectd's table name, if it is there.
func DropTable(ctx context.Context, db query.DB, name string) error {
	if _, err := db.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{"effectd", name}.Sanitize()); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}

// LockNotFree says err is a lock that was not free within lock_timeout.
func LockNotFree(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// PendingDetaches lists the partitions (Name and Parent only) whose detach
// began and did not finish (partitions_pending.sql): PostgreSQL detaches no
// other partition of a parent CONCURRENTLY while one is pending.
func PendingDetaches(ctx context.Context, db query.DB) ([]Partition, error) {
	rows, err := db.Query(ctx, partitionsPendingSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := row.Scan(&p.Name, &p.Parent)
		return p, err
	})
}

// FinishDetach finishes on db the detach of p that stopped half way
// (PendingDetaches), so that p can be dropped.
func FinishDetach(ctx context.Context, db query.DB, p Partition) error {
	_, err := db.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s FINALIZE`,
		pgx.Identifier{"effectd", p.Parent}.Sanitize(), pgx.Identifier{"effectd", p.Name}.Sanitize()))
	return err
}

// UndecidedPartitions lists the intents partitions DropPartition detached
// without deciding on them (partitions_detached_registered.sql): no writer
// reaches their rows while they are detached, and the prune's check of what
// is held would skip them, so they are to be attached again (Attach).
func UndecidedPartitions(ctx context.Context, db query.DB) ([]Partition, error) {
	rows, err := db.Query(ctx, partitionsDetachedRegisteredSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Partition])
}
