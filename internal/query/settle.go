package query

import (
	"context"
	_ "embed"
	"time"
)

//go:embed settle.sql
var settleSQL string

// Settlement is one reconciler or lookup decision, as Settle writes it.
type Settlement struct {
	IntentID    int64
	Key         string // the intent's idempotency key: the fence names the intent, not only its id
	Attempts    int32  // the fence, with From
	From, To    string // statuses
	ProviderRef string // "": keep the row's
	Error       string // "": keep the row's last_error
	StartedAt   time.Time
	Outcome     string // recorded on the lookup attempt, e.g. "found → SENT"
}

// Settle applies s as a fenced compare-and-set and records it as an attempt
// of kind lookup. It reports whether s was applied (false: fenced out).
func Settle(ctx context.Context, db DB, s Settlement) (applied bool, err error) {
	var n int
	err = db.QueryRow(ctx, settleSQL, s.IntentID, s.Attempts, s.From, s.To, nullString(s.ProviderRef),
		nullString(s.Error), s.StartedAt, s.Outcome, s.Key).Scan(&n)
	return n == 1, err
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
