package readdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The reconciliation sweep's reads of effectd.intents: the intents of a
// channel's window, and those of provider objects the window did not join.

//go:embed sweep_intents.sql
var sweepIntentsSQL string

//go:embed sweep_intents_by.sql
var sweepIntentsBySQL string

//go:embed sweep_intents_unsettled.sql
var sweepIntentsUnsettledSQL string

// SweptIntent is an intent as the sweep joins it with what its provider holds.
type SweptIntent struct {
	ID             int64
	EventID        string
	Channel        string
	Payload        json.RawMessage
	Status         statemachine.State
	ProviderRef    *string
	CreatedAt      time.Time
	ClaimedAt      *time.Time // nil: never claimed
	LeaseExpiresAt *time.Time // nil: no lease
}

// scanSwept reads one row of sweep_intents.sql or sweep_intents_by.sql;
// a time Go cannot carry is clamped.
func scanSwept(row pgx.CollectableRow) (SweptIntent, error) {
	var in SweptIntent
	created, claimed, lease := query.LooseTime{Field: "created_at"}, query.LooseTime{Field: "claimed_at"}, query.LooseTime{Field: "lease_expires_at"}
	err := row.Scan(&in.ID, &in.EventID, &in.Channel, &in.Payload, &in.Status, &in.ProviderRef, &created, &claimed, &lease)
	in.CreatedAt, in.ClaimedAt, in.LeaseExpiresAt = created.Time, claimed.Ptr(), lease.Ptr()
	return in, err
}

// SweepWindow selects the intents of Channel created in [Since, Until), at
// most Limit of them.
type SweepWindow struct {
	Channel      string
	Since, Until time.Time
	Limit        int
}

// SweepIntents reads the intents w selects, by id. It reads the window only,
// whatever the table's history: from the last id marked before w.Since, and
// through the BRIN summary of created_at.
func SweepIntents(ctx context.Context, db query.DB, w SweepWindow) ([]SweptIntent, error) {
	from, err := idBefore(ctx, db, w.Since)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, sweepIntentsSQL, w.Channel, w.Since, w.Until, w.Limit, from)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSwept)
}

// SweepIntentsBy reads the intents, of any channel, whose id is in ids or
// whose provider reference is in refs; an intent may come twice.
func SweepIntentsBy(ctx context.Context, db query.DB, ids []int64, refs []string) ([]SweptIntent, error) {
	rows, err := db.Query(ctx, sweepIntentsBySQL, ids, refs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSwept)
}

// SweepUnsettled selects the intents of Channel, of any age, that could own a
// provider object created from First to Last: those SENDING, IN_DOUBT or
// FAILED created before Last and, unless SENDING, last updated at or after
// First; at most Limit of them.
type SweepUnsettled struct {
	Channel     string
	First, Last time.Time
	Limit       int
}

// SweepIntentsUnsettled reads the intents u selects, by id.
func SweepIntentsUnsettled(ctx context.Context, db query.DB, u SweepUnsettled) ([]SweptIntent, error) {
	rows, err := db.Query(ctx, sweepIntentsUnsettledSQL, u.Channel, u.Last, u.First, u.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanSwept)
}
