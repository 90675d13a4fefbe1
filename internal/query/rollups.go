package query

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
)

// The per-minute rollups the console's charts read (migration 024): on one
// node a trigger on intents appends the deltas of every statement that moves
// intents; in the distributed mode the statements of that mode do, on the
// intents' shard (complete_bucket.sql, settle_bucket.sql,
// set_delivery_bucket.sql). FoldRollups adds them to the rollups, which stay
// on the coordinator; the charts read the rollups of their range alone.

//go:embed fold_rollups_take.sql
var foldRollupsTakeSQL string

//go:embed fold_rollups_add.sql
var foldRollupsAddSQL string

//go:embed fold_latency_add.sql
var foldLatencyAddSQL string

//go:embed rollup_sample.sql
var rollupSampleSQL string

//go:embed rollup_prune.sql
var rollupPruneSQL string

//go:embed chart_points.sql
var chartPointsSQL string

//go:embed chart_latency.sql
var chartLatencySQL string

//go:embed chart_marks.sql
var chartMarksSQL string

//go:embed chart_marks_channels.sql
var chartMarksChannelsSQL string

// AllChannels is the rollups' channel that sums every channel.
const AllChannels = "*"

// rollupLockKey is the transaction advisory lock under which one instance at
// a time folds the rollups in the distributed mode.
const rollupLockKey = 0x65666d72 // "efmr"

// rollupMeasures are minute_rollups' counted columns, in the order of
// fold_rollups_add.sql's arrays after channel and minute.
var rollupMeasures = []string{"sent", "failed", "in_doubt", "skipped", "accepted", "delivered", "undelivered",
	"provider_errors", "backoffs"}

// RollupDelta is one change to add to the rollups: Measure is a column of
// minute_rollups or "latency", with its Slot.
type RollupDelta struct {
	Channel string
	Minute  time.Time
	Measure string
	Slot    int16
	N       int64
}

// FoldRollups takes every delta of the rollups and adds them, and their sum
// over channels (AllChannels), to the rollups in one transaction. In the
// distributed mode an instance folds only while no other one does.
func FoldRollups(ctx context.Context, db TxDB, mode effectdtype.Storage) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if mode == effectdtype.Citus {
			var got bool
			if err := tx.QueryRow(ctx, tryXactLockSQL, rollupLockKey).Scan(&got); err != nil || !got {
				return err
			}
		}
		rows, err := tx.Query(ctx, foldRollupsTakeSQL)
		if err != nil {
			return err
		}
		deltas, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RollupDelta])
		if err != nil {
			return err
		}
		return AddRollups(ctx, tx, deltas)
	})
}

// AddRollups adds deltas, and their sum over channels (AllChannels), to the
// rollups. FoldRollups calls it with the deltas the writers appended; a
// test may call it to build a known history.
func AddRollups(ctx context.Context, db DB, deltas []RollupDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	type key struct {
		channel string
		minute  time.Time
	}
	type slotKey struct {
		key
		slot int16
	}
	counts := map[key][]int64{}
	latency := map[slotKey]int64{}
	for _, d := range deltas {
		for _, k := range []key{{d.Channel, d.Minute.UTC()}, {AllChannels, d.Minute.UTC()}} {
			if d.Measure == "latency" {
				latency[slotKey{k, d.Slot}] += d.N
				continue
			}
			if counts[k] == nil {
				counts[k] = make([]int64, len(rollupMeasures))
			}
			for i, m := range rollupMeasures {
				if m == d.Measure {
					counts[k][i] += d.N
				}
			}
		}
	}
	args := make([]any, 2+len(rollupMeasures))
	channels, minutes := []string{}, []time.Time{}
	columns := make([][]int64, len(rollupMeasures))
	for k, c := range counts {
		channels, minutes = append(channels, k.channel), append(minutes, k.minute)
		for i := range c {
			columns[i] = append(columns[i], c[i])
		}
	}
	args[0], args[1] = channels, minutes
	for i := range columns {
		args[2+i] = columns[i]
	}
	if len(channels) > 0 {
		if _, err := db.Exec(ctx, foldRollupsAddSQL, args...); err != nil {
			return err
		}
	}
	var lc []string
	var lm []time.Time
	var ls []int16
	var ln []int64
	for k, n := range latency {
		lc, lm, ls, ln = append(lc, k.channel), append(lm, k.minute), append(ls, k.slot), append(ln, n)
	}
	if len(lc) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, foldLatencyAddSQL, lc, lm, ls, ln)
	return err
}

// BacklogSample is one channel's backlog and oldest due age.
type BacklogSample struct {
	Channel          string
	Backlog          int64
	OldestDueSeconds float64
}

// SampleBacklog records the samples under the current minute, with their sum
// (the oldest due age: the largest) as AllChannels'.
func SampleBacklog(ctx context.Context, db DB, samples []BacklogSample) error {
	all := BacklogSample{Channel: AllChannels}
	var channels []string
	var backlogs []int64
	var ages []float64
	for _, s := range samples {
		channels, backlogs, ages = append(channels, s.Channel), append(backlogs, s.Backlog), append(ages, s.OldestDueSeconds)
		all.Backlog += s.Backlog
		all.OldestDueSeconds = max(all.OldestDueSeconds, s.OldestDueSeconds)
	}
	channels, backlogs, ages = append(channels, all.Channel), append(backlogs, all.Backlog), append(ages, all.OldestDueSeconds)
	_, err := db.Exec(ctx, rollupSampleSQL, channels, backlogs, ages)
	return err
}

// PruneRollups removes the rollups of minutes before before.
func PruneRollups(ctx context.Context, db DB, before time.Time) error {
	_, err := db.Exec(ctx, rollupPruneSQL, before)
	return err
}
