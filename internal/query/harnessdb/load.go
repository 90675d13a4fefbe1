package harnessdb

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// Writes that make a history without the dispatcher, for the benches and
// tests: channels by name, day partitions back in time, settled intents as an
// import writes them, a bare insert to measure enqueue against, and a trigger
// that ages terminal intents. No request path runs them.

//go:embed channels_add.sql
var channelsAddSQL string

//go:embed intent_insert_bare.sql
var intentInsertBareSQL string

//go:embed partitions_drop_first.sql
var partitionsDropFirstSQL string

//go:embed partitions_add_days.sql
var partitionsAddDaysSQL string

//go:embed load_history.sql
var loadHistorySQL string

//go:embed load_in_doubt.sql
var loadInDoubtSQL string

//go:embed load_orphan_events.sql
var loadOrphanEventsSQL string

//go:embed vacuum_history.sql
var vacuumHistorySQL string

//go:embed age_terminal.sql
var ageTerminalSQL string

// AddChannels registers a channel for each name in providers with its
// provider (a registered name is left as it is), every other setting its
// default: a channel the configuration does not name.
func AddChannels(ctx context.Context, db query.DB, providers map[string]string) error {
	names := make([]string, 0, len(providers))
	provs := make([]string, 0, len(providers))
	for n, p := range providers {
		names, provs = append(names, n), append(provs, p)
	}
	_, err := db.Exec(ctx, channelsAddSQL, names, provs)
	return err
}

// BareIntent is a new intent as a bare INSERT writes it.
type BareIntent struct {
	EventID, Channel string
	Payload          string // JSON text
	IdempotencyKey   string
}

// InsertBareIntent inserts in as a bare INSERT … ON CONFLICT DO NOTHING,
// without effectd.enqueue's checks, lock or notification: the baseline that
// enqueue's cost is measured against.
func InsertBareIntent(ctx context.Context, db query.DB, in BareIntent) error {
	_, err := db.Exec(ctx, intentInsertBareSQL, in.EventID, in.Channel, in.Payload, in.IdempotencyKey)
	return err
}

// DayPartitions replaces the first partition a fresh database has (all before
// tomorrow) with one partition per UTC day for the days days before today and
// today, as a deployment has once it has run that long.
func DayPartitions(ctx context.Context, db query.DB, days int) error {
	if _, err := db.Exec(ctx, partitionsDropFirstSQL); err != nil {
		return err
	}
	_, err := db.Exec(ctx, partitionsAddDaysSQL, days)
	return err
}

// History is a load of n settled intents, numbered from From+1, into a history
// of Final intents: intent Final is dated an hour ago and the first 14 days
// before (DayPartitions must cover them).
type History struct {
	From, N, Final int
}

// LoadHistory inserts h's intents as an import would write them, already
// settled (migration 012 counts them as they are inserted), a million per
// statement: over the channels bench, pay and sms in turn (AddChannels); one
// in 3,000 FAILED with its error, the others SENT, one in 500 outside bench
// undelivered; one attempt each, a provider event for each sms message, and an
// id mark per statement as serve's fold loop writes them. The first load
// (From 0) adds 3 sms intents IN_DOUBT and 2 orphan provider events.
// Counts are not folded: run the fold, then VacuumHistory.
func LoadHistory(ctx context.Context, db query.DB, h History) error {
	const chunk = 1_000_000
	total := h.From + h.N
	for lo := h.From + 1; lo <= total; lo += chunk {
		hi := min(lo+chunk-1, total)
		if _, err := db.Exec(ctx, loadHistorySQL, lo, hi, int64(h.Final)); err != nil {
			return err
		}
	}
	if h.From > 0 {
		return nil
	}
	if _, err := db.Exec(ctx, loadInDoubtSQL); err != nil {
		return err
	}
	_, err := db.Exec(ctx, loadOrphanEventsSQL)
	return err
}

// VacuumHistory vacuums and analyzes intents, attempts, provider events and
// the count deltas, as autovacuum would have some time after a load.
func VacuumHistory(ctx context.Context, db query.DB) error {
	_, err := db.Exec(ctx, vacuumHistorySQL)
	return err
}

// Checkpoint writes every dirty page out now (superuser), so that flushing a
// load's writes does not share the machine with what is timed after it.
func Checkpoint(ctx context.Context, db query.DB) error {
	_, err := db.Exec(ctx, `CHECKPOINT`)
	return err
}

// AgeTerminal installs a trigger that dates an intent's updated_at back by by
// when it becomes terminal (SENT, FAILED, SKIPPED, CANCELLED): the pruner then
// deletes it by sooner than its channel's retention says, a retention shorter
// than a policy allows.
func AgeTerminal(ctx context.Context, db query.DB, by time.Duration) error {
	_, err := db.Exec(ctx, fmt.Sprintf(ageTerminalSQL, by.Milliseconds()))
	return err
}
