package query

import (
	"context"
	_ "embed"
	"time"
)

//go:embed complete.sql
var completeSQL string

// Completion is the outcome of one provider call, as Complete writes it.
type Completion struct {
	ID            int64
	Key           string    // the intent's idempotency key: the fence names the intent, not only its id
	CreatedAt     time.Time // the intent's created_at, which names the day partition its row is in
	Attempts      int32     // the attempt the call was made under: the fence
	Status        string    // the status to set; SENDING keeps the row for the reconciler with its lease ended
	ProviderRef   string    // "": keep the row's
	LastError     string    // "": none
	NextAttemptAt time.Time // when the row is next due, for a retry
	StartedAt     time.Time
	FinishedAt    time.Time
	Outcome       string // recorded on the attempt row
	Called        bool   // a provider call was made: record an attempt row
	Delivery      string // what SENT says of the delivery; "": nothing
}

// CompleteBatch holds completions column by column, as complete.sql unnests them.
type CompleteBatch struct {
	ids                     []int64
	keys                    []string
	attempts                []int32
	statuses, refs, errs    []string
	next, started, finished []time.Time
	outcomes                []string
	called                  []bool
	delivery                []string
	oldest, newest          time.Time // the range of the completions' CreatedAt
}

// Add appends c to the batch.
func (b *CompleteBatch) Add(c Completion) {
	b.ids = append(b.ids, c.ID)
	b.keys = append(b.keys, c.Key)
	b.attempts = append(b.attempts, c.Attempts)
	b.statuses = append(b.statuses, c.Status)
	b.refs = append(b.refs, c.ProviderRef)
	b.errs = append(b.errs, c.LastError)
	b.next = append(b.next, c.NextAttemptAt)
	b.started = append(b.started, c.StartedAt)
	b.finished = append(b.finished, c.FinishedAt)
	b.outcomes = append(b.outcomes, c.Outcome)
	b.called = append(b.called, c.Called)
	b.delivery = append(b.delivery, c.Delivery)
	if len(b.ids) == 1 || c.CreatedAt.Before(b.oldest) {
		b.oldest = c.CreatedAt
	}
	if len(b.ids) == 1 || c.CreatedAt.After(b.newest) {
		b.newest = c.CreatedAt
	}
}

// Len is the number of completions in the batch.
func (b *CompleteBatch) Len() int { return len(b.ids) }

// Fenced is a completion that Complete did not apply: someone else settled
// its row.
type Fenced struct {
	ID int64
	// SettledEarly says a provider event had already settled the row SENT with
	// the very reference the call returned, which is not a conflict.
	SettledEarly bool
	// Raced says the row changed while Complete waited for it, so that the
	// statement could not tell whether a provider event did it: the completion
	// was neither applied nor recorded, and must be written again.
	Raced bool
	// Lost says no row is this intent any more: its id names another intent
	// (a failover lost the enqueue and the id was handed out again) or none.
	// The completion was neither applied nor recorded.
	Lost bool
}

// Complete applies b as fenced compare-and-sets (a row changes only while it
// is SENDING under the completion's attempt), records one attempt row per
// call, and returns the completions that were not applied. With recheck, a
// successful completion whose row changed while Complete waited for it is
// returned Raced instead of being recorded.
func Complete(ctx context.Context, db DB, b *CompleteBatch, recheck bool) ([]Fenced, error) {
	rows, err := db.Query(ctx, completeSQL, b.ids, b.attempts, b.statuses, b.refs, b.errs,
		b.next, b.started, b.finished, b.outcomes, b.called, b.delivery, recheck, b.keys, b.oldest, b.newest)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var fenced []Fenced
	for rows.Next() {
		var f Fenced
		var why string
		if err := rows.Scan(&f.ID, &why); err != nil {
			return nil, err
		}
		f.SettledEarly, f.Raced, f.Lost = why == "early", why == "raced", why == "lost"
		fenced = append(fenced, f)
	}
	return fenced, rows.Err()
}
