package query

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed sweep_intents.sql
var sweepIntentsSQL string

// SweepIntentsBy reads the intents whose id is in $1 or whose provider
// reference is in $2, of any channel, with the columns of SweepIntents; a row
// may come twice.
//
//go:embed sweep_intents_by.sql
var SweepIntentsBy string

// SweepIntents reads up to limit intents of channel created in [since, until),
// by id: id, event_id, channel, payload, status, provider_ref, created_at,
// claimed_at, lease_expires_at. It reads the window only, whatever the
// table's history.
func SweepIntents(ctx context.Context, db DB, channel string, since, until time.Time, limit int) (pgx.Rows, error) {
	var from int64
	if err := db.QueryRow(ctx, idBeforeSQL, since).Scan(&from); err != nil {
		return nil, err
	}
	return db.Query(ctx, sweepIntentsSQL, channel, since, until, limit, from)
}
