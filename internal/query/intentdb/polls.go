package intentdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// A delivery poll's record: the attempt of kind poll and the delivery it
// found, written together (RecordPoll, and RecordPollBucket in the
// distributed mode).

//go:embed record_poll.sql
var recordPollSQL string

// Poll is one delivery poll of an intent, as RecordPoll writes it.
type Poll struct {
	IntentID    int64
	Key         string // the intent's idempotency key: no row has the id and the key, nothing is written
	Attempts    int32  // the attempt number the poll is recorded under
	From        string // the delivery the poll started from ("" = unknown): the compare-and-set
	To          string // the delivery to move to; "" = none
	Detail      string // the provider's status and error code
	StartedAt   time.Time
	Outcome     string // recorded on the poll attempt
	Error       string // "" = none
	ProviderRef string
}

// RecordPoll records p as an attempt of kind poll and moves the intent's
// delivery from p.From to p.To (when set) as a compare-and-set, both only on
// the row that still has p's id and key; it reports whether the delivery moved.
func RecordPoll(ctx context.Context, db query.DB, p Poll) (moved bool, err error) {
	var n int
	err = db.QueryRow(ctx, recordPollSQL, p.IntentID, p.Attempts, p.From, p.To, p.Detail, p.StartedAt,
		p.Outcome, p.Error, p.ProviderRef, p.Key).Scan(&n)
	return n == 1, err
}
