package readdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// The windows the scheduled reconciliation sweep finished, by channel
// (effectd.sweep_windows, migration 019): a table of the coordinator in both
// storage modes, so that each statement is the same in both.

//go:embed sweep_window_last.sql
var sweepWindowLastSQL string

//go:embed sweep_window_add.sql
var sweepWindowAddSQL string

//go:embed sweep_windows.sql
var sweepWindowsSQL string

// SweptUntil returns the end of the latest window channel's scheduled sweep
// finished; the zero time when it finished none.
func SweptUntil(ctx context.Context, db query.DB, channel string) (time.Time, error) {
	var until *time.Time
	if err := db.QueryRow(ctx, sweepWindowLastSQL, channel).Scan(&until); err != nil || until == nil {
		return time.Time{}, err
	}
	return *until, nil
}

// AddSweptWindow records that channel's scheduled sweep finished w with
// findings findings.
func AddSweptWindow(ctx context.Context, db query.DB, channel string, w effectdtype.SweepWindow, findings int) error {
	_, err := db.Exec(ctx, sweepWindowAddSQL, channel, w.Since, w.Until, findings)
	return err
}

// SweptWindows returns the windows of channel's scheduled sweep that meet
// [since, until), in order of their start, at most limit (their columns
// since and until read by name).
func SweptWindows(ctx context.Context, db query.DB, channel string, since, until time.Time, limit int) ([]effectdtype.SweepWindow, error) {
	rows, err := db.Query(ctx, sweepWindowsSQL, channel, since, until, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.SweepWindow])
}
