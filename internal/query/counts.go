package query

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// The operators' figures over effectd.intents that do not grow with history:
// the settled counts kept as changes happen (intent_counts, with the deltas
// in intent_count_deltas) and the gauges read from partial indexes.

//go:embed fold_counts.sql
var foldCountsSQL string

//go:embed channel_counts.sql
var channelCountsSQL string

//go:embed channel_gauges.sql
var channelGaugesSQL string

// FoldSettledCounts folds the deltas of the settled counts into the counts,
// so readers add only the few appended since. Instances folding at once each
// take distinct delta rows.
func FoldSettledCounts(ctx context.Context, db DB) error {
	_, err := db.Exec(ctx, foldCountsSQL)
	return err
}

// StatusCount is how many intents of a channel are in a status.
type StatusCount struct {
	Channel string
	Status  statemachine.State
	N       int64
}

// ChannelCounts counts the intents of channel (nil: every registered
// channel) by status: the live states exactly from their partial indexes, the
// settled states from the counts kept as changes happen. A status with no
// intent is left out. In the distributed mode (scanned) every row is read
// instead: see channel_counts_scanned.sql.
func ChannelCounts(ctx context.Context, db DB, channel *string) (counts []StatusCount, scanned bool, err error) {
	sql := channelCountsSQL
	if scanned, err = Distributed(ctx, db); err != nil {
		return nil, false, err
	} else if scanned {
		sql = channelCountsScannedSQL
	}
	rows, err := db.Query(ctx, sql, channel)
	if err != nil {
		return nil, scanned, err
	}
	counts, err = pgx.CollectRows(rows, pgx.RowToStructByPos[StatusCount])
	return counts, scanned, err
}

// ChannelGauges are one channel's gauges.
type ChannelGauges struct {
	Channel string
	effectdtype.Gauges
}

// Gauges reads every registered channel's gauges, by channel name: the wait
// of its oldest due PENDING intent, its SENDING intents past their lease, its
// IN_DOUBT intents and its settled intents by delivery.
func Gauges(ctx context.Context, db DB) ([]ChannelGauges, error) {
	sql := channelGaugesSQL
	if scanned, err := Distributed(ctx, db); err != nil {
		return nil, err
	} else if scanned {
		sql = channelGaugesScannedSQL
	}
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ChannelGauges, error) {
		var g ChannelGauges
		err := row.Scan(&g.Channel, &g.OldestPendingAge, &g.SendingPastLease, &g.InDoubt,
			&g.Deliveries.Accepted, &g.Deliveries.Delivered, &g.Deliveries.Undelivered)
		return g, err
	})
}

//go:embed channel_counts_scanned.sql
var channelCountsScannedSQL string

//go:embed channel_gauges_scanned.sql
var channelGaugesScannedSQL string

//go:embed distributed.sql
var distributedSQL string

// Distributed reports whether effectd runs in the distributed mode, where
// ChannelCounts and Gauges count by reading every shard's rows (counts_kind
// "scanned"): Citus refuses the triggers that keep the settled counts.
func Distributed(ctx context.Context, db DB) (bool, error) {
	var d bool
	err := db.QueryRow(ctx, distributedSQL).Scan(&d)
	return d, err
}
