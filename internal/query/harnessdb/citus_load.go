package harnessdb

import (
	"context"
	_ "embed"

	"github.com/effectd/effectd/internal/query"
)

// What the citus-scale bench asks of the workers through the coordinator.

//go:embed shards_left.sql
var shardsLeftSQL string

//go:embed checkpoint_workers.sql
var checkpointWorkersSQL string

//go:embed distributed_size.sql
var distributedSizeSQL string

// DistributedTableSize is TableSize for intents or attempts in the
// distributed mode: the bytes of their shards on the workers.
func DistributedTableSize(ctx context.Context, db query.DB, table string) (heap, indexes int64, err error) {
	err = db.QueryRow(ctx, distributedSizeSQL, table).Scan(&heap, &indexes)
	return heap, indexes, err
}

// ShardsLeft counts the tables left on the Citus workers of the partitions
// named in names, their shards included (run_command_on_workers): 0 once a
// drop through the coordinator reached every shard.
func ShardsLeft(ctx context.Context, db query.DB, names []string) (n int64, err error) {
	if len(names) == 0 {
		return 0, nil
	}
	err = db.QueryRow(ctx, shardsLeftSQL, names).Scan(&n)
	return n, err
}

// CheckpointWorkers runs CHECKPOINT on every Citus worker (superuser).
func CheckpointWorkers(ctx context.Context, db query.DB) error {
	_, err := db.Exec(ctx, checkpointWorkersSQL)
	return err
}

//go:embed recover_prepared.sql
var recoverPreparedSQL string

// RecoverPrepared settles now the two-phase commits a Citus worker left
// PREPARED (superuser) and reports how many it settled and how many prepared
// transactions the workers still hold. A producer's COMMIT returns once the
// coordinator has recorded it; a worker that fails before its COMMIT PREPARED
// hides that transaction's rows on it until the recovery, which Citus's
// maintenance daemon runs every citus.recover_2pc_interval: a run has not
// drained while any is pending.
func RecoverPrepared(ctx context.Context, db query.DB) (recovered, left int, err error) {
	err = db.QueryRow(ctx, recoverPreparedSQL).Scan(&recovered, &left)
	return recovered, left, err
}
