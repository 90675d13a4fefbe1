package harnessdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// Reads of every intent at once, with what its attempts say: what a finished
// run is checked against (the chaos suite's checker, its failover and its
// drain). They scan the whole table; no request path runs them.

//go:embed intent_tallies.sql
var intentTalliesSQL string

//go:embed late_completions.sql
var lateCompletionsSQL string

//go:embed attempt_trail.sql
var attemptTrailSQL string

//go:embed intent_statuses.sql
var intentStatusesSQL string

//go:embed count_open.sql
var countOpenSQL string

// The same reads where intents and attempts have a column bucket (the
// distributed mode): Citus runs a join of its distributed tables only on their
// distribution column.
var (
	//go:embed intent_tallies_bucket.sql
	intentTalliesBucketSQL string
	//go:embed late_completions_bucket.sql
	lateCompletionsBucketSQL string
	//go:embed attempt_trail_bucket.sql
	attemptTrailBucketSQL string
	//go:embed has_bucket.sql
	hasBucketSQL string
)

// bucketed picks the read for the layout: b when intents have a column bucket.
func bucketed(ctx context.Context, db query.DB, a, b string) (string, error) {
	var has bool
	if err := db.QueryRow(ctx, hasBucketSQL).Scan(&has); err != nil {
		return "", err
	}
	if has {
		return b, nil
	}
	return a, nil
}

// IntentTally is an intent with counts of the attempts that explain a second
// effect or a refused outcome.
type IntentTally struct {
	ID              int64
	EventID         string
	Channel         string
	Status          statemachine.State
	ProviderRef     string // "" = none
	IdempotencyKey  string
	AmbiguousResend int // lookups that found the send ambiguous and made the intent PENDING again
	PolicyResend    int // lookups after which the channel's policy made the intent PENDING again
	FencedOut       int // outcomes refused by the fence ("(fenced out)")
	Ambiguous       int // lookups that found the send ambiguous
	InDoubtSends    int // calls whose answer nobody knew: maybe sent, in doubt, or none recorded before the lease expired
}

// TallyIntents reads every intent with the counts of its attempts.
func TallyIntents(ctx context.Context, db query.DB) ([]IntentTally, error) {
	q, err := bucketed(ctx, db, intentTalliesSQL, intentTalliesBucketSQL)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[IntentTally])
}

// LateCompletion is an intent whose attempt the reconciler settled and whose
// original worker then had its send outcome accepted anyway.
type LateCompletion struct {
	ID      int64
	Channel string
	EventID string
}

// LateCompletions lists the intents with a send outcome recorded after the
// reconciler's lookup settled the same attempt and not refused by the fence
// ("(fenced out)", "(already settled by callback)", "lease expired"): once an
// attempt is settled, its late answer must change nothing, so each one is a
// broken guarantee.
func LateCompletions(ctx context.Context, db query.DB) ([]LateCompletion, error) {
	q, err := bucketed(ctx, db, lateCompletionsSQL, lateCompletionsBucketSQL)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[LateCompletion])
}

// AttemptTrail is one attempt of an intent, with the intent, as text for a
// report: times as HH24:MI:SS.MS, "-" for a missing end or provider
// reference, the error cut to 120 characters.
type AttemptTrail struct {
	IntentID    int64
	Channel     string
	EventID     string
	Status      statemachine.State
	ProviderRef string
	Attempt     int
	Kind        string
	Started     string
	Finished    string
	Outcome     string
	Error       string
	AttemptRef  string // the attempt's provider reference
}

// AttemptTrails lists the attempts of the intents ids, by intent and then in
// the order they were recorded.
func AttemptTrails(ctx context.Context, db query.DB, ids []int64) ([]AttemptTrail, error) {
	q, err := bucketed(ctx, db, attemptTrailSQL, attemptTrailBucketSQL)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[AttemptTrail])
}

// KeyedStatus is an intent's status and claim count, keyed by its channel
// and event id.
type KeyedStatus struct {
	Channel  string
	EventID  string
	Status   statemachine.State
	Attempts int
}

// IntentStatuses reads the status and claim count of every intent.
func IntentStatuses(ctx context.Context, db query.DB) ([]KeyedStatus, error) {
	rows, err := db.Query(ctx, intentStatusesSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[KeyedStatus])
}

// CountOpen counts the intents still PENDING or SENDING: zero once a run has
// drained.
func CountOpen(ctx context.Context, db query.DB) (open int, err error) {
	err = db.QueryRow(ctx, countOpenSQL).Scan(&open)
	return open, err
}
