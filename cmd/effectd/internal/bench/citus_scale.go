package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage"
)

// citusSkipped are the scale reads the distributed mode does not serve, and
// why: the citus-scale scenario prints them as skipped instead of timing them.
// None at present: every read of scaleReads answers in this mode, the bulk
// snapshot included (applying a bulk action is another matter).
var citusSkipped = map[string]string{}

// citusScale is the scale scenario's reads on the distributed layout: a
// Citus coordinator and two workers on loopback, effectd migrated in the
// distributed mode (32 buckets, co-located with producer.orders), the same
// history loaded through the coordinator at CitusScaleRows/10 and
// CitusScaleRows intents (harnessdb.LoadHistoryBuckets), every read of the scale
// scenario timed through serve's admin API at both sizes, then the two
// oldest days' partitions dropped on every shard while serve runs. It fails
// as scale does when a read breaks its budget or grows with history, and when
// the drop leaves a shard of a dropped partition on a worker. The dispatch
// figures of scale are not measured: three PostgreSQL servers on this
// machine's cores cannot show them.
func (e *env) citusScale(ctx context.Context) error {
	c, err := localpg.StartCitus(ctx, filepath.Join(e.dir, "citus"), 2, localpg.Options{Fast: !e.opt.Durable,
		Settings: []string{"max_wal_size=4GB", "checkpoint_timeout=30min"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	url, pool, cfg, err := e.citusDatabase(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := historyLayout(ctx, pool); err != nil {
		return err
	}
	rows := e.opt.CitusScaleRows
	sizes := []int{max(rows/10, 1000), rows}
	medians, err := e.timeAtSizes(ctx, url, pool, cfg, sizes, bucketed)
	if err != nil {
		return err
	}
	broken := e.printReads(sizes, medians, citusSkipped)
	pruneBroken, err := e.citusPrune(ctx, url, pool, cfg)
	if err != nil {
		return err
	}
	broken = append(broken, pruneBroken...)
	if len(broken) > 0 {
		return fmt.Errorf("%d figures broke their budget or grew with history: %v", len(broken), broken)
	}
	return nil
}

// bucketed is the history of the distributed layout, loaded through the
// coordinator into the buckets.
var bucketed = history{
	load: loadBucketHistory,
	describe: func(ctx context.Context, pool *pgxpool.Pool, n, added int, took time.Duration) string {
		return fmt.Sprintf("citus-scale: %d retained intents loaded through the coordinator into %d buckets (%d added in %.1fs, with VACUUM ANALYZE); %s",
			n, citusBuckets, added, took.Seconds(), sizesOf(ctx, pool, func(t string) bool { return t != "provider_events" }))
	},
	skipped: citusSkipped,
}

// citusPrune drops, through the pruner's own statements, the oldest
// partitions holding the history's rows (a retention lowered to a minute
// less than the time since the one holding the first loaded day ends: a week
// wide in this mode, so which days that is depends on the weekday) while
// serve runs on the history, prints how many intents that removed at what
// rate, and checks on every worker that no shard of a dropped partition is
// left.
func (e *env) citusPrune(ctx context.Context, url string, pool *pgxpool.Pool, cfg string) (broken []string, err error) {
	horizon, err := firstDayHorizon(ctx, pool)
	if err != nil {
		return nil, err
	}
	rows, err := expiredRows(ctx, pool, horizon)
	if err != nil {
		return nil, err
	}
	in, err := e.serve(ctx, url, cfg, false)
	if err != nil {
		return nil, err
	}
	p := dropExpired(ctx, storage.New(effectdtype.Citus, pool, storage.Leases{}), horizon, rows)
	if serr := in.stop(); serr != nil && p.err == nil {
		p.err = fmt.Errorf("effectd serve: %w", serr)
	}
	if p.err != nil {
		return nil, fmt.Errorf("prune: %w", p.err)
	}
	left, err := harnessdb.ShardsLeft(ctx, pool, p.names)
	if err != nil {
		return nil, err
	}
	rate := float64(p.rows) / p.took.Seconds()
	verdict := ""
	if p.partitions == 0 || left > 0 {
		verdict = "  NOT DROPPED EVERYWHERE"
		broken = append(broken, "prune")
	}
	fmt.Fprintf(e.out, "  prune: %d partitions (%d intents, the days to %s) dropped on every shard in %.2fs = %.0f rows/s while serve ran; shards of them left on the workers: %d%s\n",
		p.partitions, p.rows, time.Now().Add(-horizon).UTC().Format("2006-01-02 15:04"), p.took.Seconds(), rate, left, verdict)
	return broken, nil
}

// firstDayHorizon is a minute less than the time since the intents
// partition holding the history's first loaded day (14 days ago,
// harnessdb.History) ended: the retention that expires it and those before it.
func firstDayHorizon(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	all, err := retentiondb.ExpiredPartitions(ctx, pool, -365*24*time.Hour)
	if err != nil {
		return 0, err
	}
	first := time.Now().Add(-14 * 24 * time.Hour)
	for _, p := range all {
		if p.Parent == "intents" && !first.Before(p.Lower.Time) && first.Before(p.Upper.Time) {
			return time.Since(p.Upper.Time) - time.Minute, nil
		}
	}
	return 0, fmt.Errorf("no intents partition holds %s", first)
}

// loadBucketHistory adds n settled intents after the first `from` into a
// history of final on the distributed layout (harnessdb.LoadHistoryBuckets), and
// ends with VACUUM ANALYZE (Citus runs it on every shard) and a CHECKPOINT on
// every node. The settled counts are not folded: this mode counts by scanning.
func loadBucketHistory(ctx context.Context, pool *pgxpool.Pool, from, n, final int) error {
	if err := harnessdb.LoadHistoryBuckets(ctx, pool, harnessdb.History{From: from, N: n, Final: final}, citusBuckets); err != nil {
		return err
	}
	if err := harnessdb.VacuumHistory(ctx, pool); err != nil {
		return err
	}
	if err := harnessdb.CheckpointWorkers(ctx, pool); err != nil {
		return err
	}
	return checkpoint(ctx, pool)
}
