package readdb

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// ChartRow is one point of a chart as chart_points.sql sums it.
type ChartRow struct {
	At                               time.Time
	Sent, Failed, InDoubt, Skipped   int64
	Accepted, Delivered, Undelivered int64
	ProviderErrors, Backoffs         int64
	Backlog                          *int64
	OldestDueSeconds                 *float64
}

// LatencySlots is one point's latency histogram: how many decisions fell in
// each slot (migration 024: slot i from 2^(i/2) ms to 2^((i+1)/2) ms).
type LatencySlots struct {
	At   time.Time
	Slot int16
	N    int64
}

// ChartRows reads the points of channels (AllChannels alone for the whole
// system) from from to to, by step, from the rollups of that range: the hour
// rollups when step is whole hours (from on a UTC hour), the minute rollups
// otherwise.
func ChartRows(ctx context.Context, db query.DB, channels []string, from, to time.Time, step time.Duration) ([]ChartRow, []LatencySlots, error) {
	pointsSQL, latencySQL := chartSQL(step)
	rows, err := db.Query(ctx, pointsSQL, channels, from, to, step)
	if err != nil {
		return nil, nil, err
	}
	points, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ChartRow])
	if err != nil {
		return nil, nil, err
	}
	rows, err = db.Query(ctx, latencySQL, channels, from, to, step)
	if err != nil {
		return nil, nil, err
	}
	slots, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LatencySlots])
	return points, slots, err
}

// chartSQL returns the statements that read a chart's points and latency
// slots by step: over the hour rollups when the step is whole hours, so that
// a step reads a row per channel (and slot), over the minute rollups
// otherwise.
func chartSQL(step time.Duration) (points, latency string) {
	if step >= time.Hour && step%time.Hour == 0 {
		return chartHourPointsSQL, chartHourLatencySQL
	}
	return chartPointsSQL, chartLatencySQL
}

// ChartMarks reads the newest limit audit entries from from to to, of
// channels (nil: of every channel and of none).
func ChartMarks(ctx context.Context, db query.DB, channels []string, from, to time.Time, limit int) ([]effectdtype.ChartMark, error) {
	var rows pgx.Rows
	var err error
	if channels == nil {
		rows, err = db.Query(ctx, chartMarksSQL, from, to, limit)
	} else {
		rows, err = db.Query(ctx, chartMarksChannelsSQL, channels, from, to, limit)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.ChartMark])
}
