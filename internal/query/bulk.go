package query

import (
	"context"
	_ "embed"
	"strings"

	"github.com/jackc/pgx/v5"
)

// BulkCreate creates a bulk snapshot of action $1 (resolve as $2) over filter
// $3 with reason $4 by actor $5, applicable for $6; returns id and expiry.
//
//go:embed bulk_create.sql
var BulkCreate string

// BulkDropExtra drops the last row of snapshot $1, frozen past the limit.
//
//go:embed bulk_drop_extra.sql
var BulkDropExtra string

// BulkSetMatched records that snapshot $1 froze $2 intents.
//
//go:embed bulk_set_matched.sql
var BulkSetMatched string

// BulkSample reads the first $2 intents of snapshot $1, whole.
//
//go:embed bulk_sample.sql
var BulkSample string

// BulkPrune deletes the snapshots that expired more than $1 ago.
//
//go:embed bulk_prune.sql
var BulkPrune string

// BulkClaim marks snapshot $1 applied by $2, once and before it expires, and
// returns its action, resolve_as and reason.
//
//go:embed bulk_claim.sql
var BulkClaim string

// BulkState reads snapshot $1's actor, filter, when it was applied and when it expires.
//
//go:embed bulk_state.sql
var BulkState string

// BulkRows lists the intents frozen in snapshot $1 with their frozen status
// and attempts and their channel now.
//
//go:embed bulk_rows.sql
var BulkRows string

// BulkFinish records that snapshot $1 applied $2 intents and skipped $3.
//
//go:embed bulk_finish.sql
var BulkFinish string

// ChannelNames lists the registered channels' names.
//
//go:embed channel_names.sql
var ChannelNames string

//go:embed bulk_freeze.sql
var bulkFreezeSQL string

// BulkFilter selects the intents FreezeBulk freezes. A nil field does not filter.
type BulkFilter struct {
	Snapshot      string
	Limit         int
	States        []string // the states the action applies to
	Channel       *string
	EventIDPrefix *string
	Channels      []string // among these channels; nil: every channel
}

// FreezeBulk freezes the intents f selects into its snapshot, with their
// state now, and returns how many it froze.
func FreezeBulk(ctx context.Context, db DB, f BulkFilter) (int64, error) {
	s := newStmt(bulkFreezeSQL, f.Snapshot, f.Limit)
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = s.word("status", st)
	}
	if len(states) == 0 {
		states = []string{"false"}
	}
	s.and("(" + strings.Join(states, " OR ") + ")")
	if f.Channel != nil {
		s.and("channel = %s", *f.Channel)
	}
	if f.EventIDPrefix != nil {
		s.and("starts_with(event_id, %s)", *f.EventIDPrefix)
	}
	if f.Channels != nil {
		s.and("channel = ANY (%s::text[])", f.Channels)
	}
	s.raw("ORDER BY id\nLIMIT $2")
	tag, err := db.Exec(ctx, s.sql(), append([]any{pgx.QueryExecModeExec}, s.args...)...)
	return tag.RowsAffected(), err
}
