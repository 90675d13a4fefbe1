package readdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
)

// The per-minute rollups the console's charts read (migration 024), and their
// hourly sums (migration 027): on one node a trigger on intents appends the
// deltas of every statement that moves intents; in the distributed mode the
// statements of that mode do, on the intents' shard (complete_bucket.sql,
// settle_bucket.sql, set_delivery_bucket.sql). FoldRollups adds them to the
// minute and hour rollups, which stay on the coordinator; the charts read the
// rollups of their range alone, minutes for steps under an hour, hours
// otherwise.

//go:embed fold_rollups_take.sql
var foldRollupsTakeSQL string

//go:embed fold_rollups_add.sql
var foldRollupsAddSQL string

//go:embed fold_latency_add.sql
var foldLatencyAddSQL string

//go:embed fold_hour_rollups_add.sql
var foldHourRollupsAddSQL string

//go:embed fold_hour_latency_add.sql
var foldHourLatencyAddSQL string

//go:embed rollup_sample.sql
var rollupSampleSQL string

//go:embed rollup_prune.sql
var rollupPruneSQL string

//go:embed chart_points.sql
var chartPointsSQL string

//go:embed chart_latency.sql
var chartLatencySQL string

//go:embed chart_hour_points.sql
var chartHourPointsSQL string

//go:embed chart_hour_latency.sql
var chartHourLatencySQL string

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
// distributed mode FoldRollupsBucket folds.
func FoldRollups(ctx context.Context, db query.TxDB) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return foldRollupsIn(ctx, tx) })
}

// FoldRollupsBucket is FoldRollups in the distributed mode: an instance folds
// only while no other one does.
func FoldRollupsBucket(ctx context.Context, db query.TxDB) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, tryXactLockSQL, rollupLockKey).Scan(&got); err != nil || !got {
			return err
		}
		return foldRollupsIn(ctx, tx)
	})
}

// foldRollupsIn takes every delta of the rollups in tx and adds them
// (AddRollups).
func foldRollupsIn(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, foldRollupsTakeSQL)
	if err != nil {
		return err
	}
	deltas, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RollupDelta])
	if err != nil {
		return err
	}
	return AddRollups(ctx, tx, deltas)
}

// AddRollups adds deltas, and their sum over channels (AllChannels), to the
// minute rollups and to the hour rollups holding their minutes (UTC hours),
// so that an hour's row is the sum of its minutes' rows. FoldRollups calls it
// with the deltas the writers appended; a test may call it to build a known
// history.
func AddRollups(ctx context.Context, db query.DB, deltas []RollupDelta) error {
	minutes, hours := rollupSums{}, rollupSums{}
	for _, d := range deltas {
		minute := d.Minute.UTC()
		for _, channel := range []string{d.Channel, AllChannels} {
			minutes.add(channel, minute, d)
			hours.add(channel, minute.Truncate(time.Hour), d)
		}
	}
	if err := minutes.write(ctx, db, foldRollupsAddSQL, foldLatencyAddSQL); err != nil {
		return err
	}
	return hours.write(ctx, db, foldHourRollupsAddSQL, foldHourLatencyAddSQL)
}

// rollupKey is a rollup row's channel and minute or hour.
type rollupKey struct {
	channel string
	at      time.Time
}

// rollupSlotKey is a latency row's channel, minute or hour, and slot.
type rollupSlotKey struct {
	rollupKey
	slot int16
}

// rollupSums are the deltas of one fold summed by rollup row: counts in the
// order of rollupMeasures, latency by slot.
type rollupSums struct {
	counts  map[rollupKey][]int64
	latency map[rollupSlotKey]int64
}

// add adds d to the row of channel at at.
func (s *rollupSums) add(channel string, at time.Time, d RollupDelta) {
	k := rollupKey{channel, at}
	if d.Measure == "latency" {
		if s.latency == nil {
			s.latency = map[rollupSlotKey]int64{}
		}
		s.latency[rollupSlotKey{k, d.Slot}] += d.N
		return
	}
	if s.counts == nil {
		s.counts = map[rollupKey][]int64{}
	}
	if s.counts[k] == nil {
		s.counts[k] = make([]int64, len(rollupMeasures))
	}
	for i, m := range rollupMeasures {
		if m == d.Measure {
			s.counts[k][i] += d.N
		}
	}
}

// write adds the sums to the rollups through countsSQL (arrays of channels,
// times and each measure) and latencySQL (channels, times, slots, counts).
func (s *rollupSums) write(ctx context.Context, db query.DB, countsSQL, latencySQL string) error {
	if len(s.counts) > 0 {
		args := make([]any, 2+len(rollupMeasures))
		var channels []string
		var ats []time.Time
		columns := make([][]int64, len(rollupMeasures))
		for k, c := range s.counts {
			channels, ats = append(channels, k.channel), append(ats, k.at)
			for i := range c {
				columns[i] = append(columns[i], c[i])
			}
		}
		args[0], args[1] = channels, ats
		for i := range columns {
			args[2+i] = columns[i]
		}
		if _, err := db.Exec(ctx, countsSQL, args...); err != nil {
			return err
		}
	}
	if len(s.latency) == 0 {
		return nil
	}
	var lc []string
	var la []time.Time
	var ls []int16
	var ln []int64
	for k, n := range s.latency {
		lc, la, ls, ln = append(lc, k.channel), append(la, k.at), append(ls, k.slot), append(ln, n)
	}
	_, err := db.Exec(ctx, latencySQL, lc, la, ls, ln)
	return err
}

// BacklogSample is one channel's backlog and oldest due age.
type BacklogSample struct {
	Channel          string
	Backlog          int64
	OldestDueSeconds float64
}

// SampleBacklog records the samples under the current minute, with their sum
// (the oldest due age: the largest) as AllChannels', and keeps in the hour
// holding that minute the largest of its minutes' samples.
func SampleBacklog(ctx context.Context, db query.DB, samples []BacklogSample) error {
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

// PruneRollups removes the rollups of minutes before before, and those of
// hours whose every minute is before before.
func PruneRollups(ctx context.Context, db query.DB, before time.Time) error {
	_, err := db.Exec(ctx, rollupPruneSQL, before)
	return err
}
