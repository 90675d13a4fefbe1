package readdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The operators' figures over effectd.intents that do not grow with history:
// the settled counts kept as changes happen (intent_counts, with the deltas
// in intent_count_deltas) and the gauges read from partial indexes. On one
// node triggers on intents write the deltas (migration 012); in the
// distributed mode, where Citus refuses triggers on a distributed table, the
// statements of that mode that change intents write them, on the intents'
// shard (complete_bucket.sql, settle_bucket.sql, operate_bucket.sql), and
// each of these reads has a *_bucket.sql variant.

//go:embed fold_counts.sql
var foldCountsSQL string

//go:embed fold_counts_bucket.sql
var foldCountsBucketSQL string

//go:embed try_xact_lock.sql
var tryXactLockSQL string

//go:embed channel_counts.sql
var channelCountsSQL string

//go:embed channel_counts_bucket.sql
var channelCountsBucketSQL string

//go:embed channel_gauges.sql
var channelGaugesSQL string

//go:embed channel_gauges_bucket.sql
var channelGaugesBucketSQL string

// foldLockKey is the transaction advisory lock under which one instance at a
// time folds in the distributed mode.
const foldLockKey = 0x65666672 // "effr"

// FoldSettledCounts folds the deltas of the settled counts into the counts,
// so readers add only the few appended since. Instances folding at once each
// take distinct delta rows.
func FoldSettledCounts(ctx context.Context, db query.TxDB) error {
	_, err := db.Exec(ctx, foldCountsSQL)
	return err
}

// FoldSettledCountsBucket is FoldSettledCounts in the distributed mode, where
// a fold locks rows on every shard: an instance folds only while no other one
// does.
func FoldSettledCountsBucket(ctx context.Context, db query.TxDB) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, tryXactLockSQL, foldLockKey).Scan(&got); err != nil || !got {
			return err
		}
		_, err := tx.Exec(ctx, foldCountsBucketSQL)
		return err
	})
}

// StatusCount is how many intents of a channel are in a status.
type StatusCount struct {
	Channel string             `db:"name"`
	Status  statemachine.State `db:"status"`
	N       int64              `db:"n"`
}

// ChannelCounts counts the intents of channel (nil: every registered
// channel) by status: the live states exactly from their partial indexes, the
// settled states from the counts kept as changes happen. A status with no
// intent is left out.
func ChannelCounts(ctx context.Context, db query.DB, channel *string) ([]StatusCount, error) {
	return readCounts(ctx, db, channelCountsSQL, channel)
}

// ChannelCountsBucket is ChannelCounts in the distributed mode.
func ChannelCountsBucket(ctx context.Context, db query.DB, channel *string) ([]StatusCount, error) {
	return readCounts(ctx, db, channelCountsBucketSQL, channel)
}

// readCounts runs sql, channel_counts.sql or its bucket variant.
func readCounts(ctx context.Context, db query.DB, sql string, channel *string) ([]StatusCount, error) {
	rows, err := db.Query(ctx, sql, channel)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[StatusCount])
}

// Gauges reads every registered channel's gauges, by channel name: the wait
// of its oldest due PENDING intent, its SENDING intents past their lease, its
// IN_DOUBT intents and its settled intents by delivery.
func Gauges(ctx context.Context, db query.DB) ([]effectdtype.ChannelGauges, error) {
	return readGauges(ctx, db, channelGaugesSQL)
}

// GaugesBucket is Gauges in the distributed mode.
func GaugesBucket(ctx context.Context, db query.DB) ([]effectdtype.ChannelGauges, error) {
	return readGauges(ctx, db, channelGaugesBucketSQL)
}

// readGauges runs sql, channel_gauges.sql or its bucket variant.
func readGauges(ctx context.Context, db query.DB, sql string) ([]effectdtype.ChannelGauges, error) {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (effectdtype.ChannelGauges, error) {
		var g effectdtype.ChannelGauges
		err := row.Scan(&g.Channel, &g.OldestPendingAge, &g.SendingPastLease, &g.InDoubt,
			&g.Deliveries.Accepted, &g.Deliveries.Delivered, &g.Deliveries.Undelivered)
		return g, err
	})
}

//go:embed channel_figures_bucket.sql
var channelFiguresBucketSQL string

// Figures reads what ChannelCounts (of every registered channel) and Gauges
// read, together: on one PostgreSQL the two reads, one after the other.
func Figures(ctx context.Context, db query.DB) ([]StatusCount, []effectdtype.ChannelGauges, error) {
	counts, err := readCounts(ctx, db, channelCountsSQL, nil)
	if err != nil {
		return nil, nil, err
	}
	gauges, err := readGauges(ctx, db, channelGaugesSQL)
	return counts, gauges, err
}

// FiguresBucket is Figures in the distributed mode: one round of tasks over
// the shards (channel_figures_bucket.sql), where the two reads were a round
// each.
func FiguresBucket(ctx context.Context, db query.DB) ([]StatusCount, []effectdtype.ChannelGauges, error) {
	rows, err := db.Query(ctx, channelFiguresBucketSQL)
	if err != nil {
		return nil, nil, err
	}
	var counts []StatusCount
	var gauges []effectdtype.ChannelGauges
	var channel string
	var status *string
	var n, pastLease, accepted, delivered, undelivered int64
	var age float64
	_, err = pgx.ForEachRow(rows, []any{&channel, &status, &n, &age, &pastLease, &accepted, &delivered, &undelivered}, func() error {
		if len(gauges) == 0 || gauges[len(gauges)-1].Channel != channel {
			gauges = append(gauges, effectdtype.ChannelGauges{Channel: channel})
		}
		if status == nil {
			return nil
		}
		if n > 0 {
			counts = append(counts, StatusCount{Channel: channel, Status: statemachine.State(*status), N: n})
		}
		g := &gauges[len(gauges)-1]
		g.OldestPendingAge = max(g.OldestPendingAge, age)
		g.SendingPastLease += pastLease
		if statemachine.State(*status) == statemachine.InDoubt {
			g.InDoubt += n
		}
		g.Deliveries.Accepted += accepted
		g.Deliveries.Delivered += delivered
		g.Deliveries.Undelivered += undelivered
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return counts, gauges, nil
}
