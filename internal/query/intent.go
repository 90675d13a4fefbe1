package query

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

// SelectIntent reads intent $1, whole.
//
//go:embed select_intent.sql
var SelectIntent string

// Operate applies an operator's transition of intent $1 from status $2 with
// $3 attempts to status $4 (provider reference $5 when not NULL) as a fenced
// compare-and-set, and returns the intent after, whole, or no row.
//
//go:embed operate.sql
var Operate string

// OperatorAttempt records an operator's transition of intent $1 (attempt $2)
// as an attempt with outcome $3 and provider reference $4.
//
//go:embed operator_attempt.sql
var OperatorAttempt string

// MaybeApplied reads, for intent $1 of channel $2, the channel's provider, the
// database's clock, and whether a call was ever made.
//
//go:embed maybe_applied.sql
var MaybeApplied string

// ListAttempts reads the newest $2 attempts of intent $1, oldest first.
//
//go:embed list_attempts.sql
var ListAttempts string

// IntentChannel reads the channel of intent $1.
//
//go:embed intent_channel.sql
var IntentChannel string

//go:embed list_intents.sql
var listIntentsSQL string

// IntentFilter selects a page of intents for ListIntents. A nil field does
// not filter.
type IntentFilter struct {
	After    int64 // ids above this one
	Limit    int64
	Status   *string
	Channel  *string
	EventID  *string
	Delivery *string
	Search   *string    // an event id, idempotency key or provider reference, exactly
	Since    *time.Time // created at or after
	Until    *time.Time // created before
	Channels []string   // among these channels; nil: every channel
}

// ListIntents reads up to f.Limit intents by id, whole (dispatcher.ScanIntent reads each row).
func ListIntents(ctx context.Context, db DB, f IntentFilter) (pgx.Rows, error) {
	return db.Query(ctx, listIntentsSQL, f.After, f.Limit, f.Status, f.Channel, f.EventID, f.Delivery,
		f.Search, f.Since, f.Until, f.Channels)
}
