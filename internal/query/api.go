package query

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
)

// The admin API's reads and writes of channels.
var (
	// ChannelGet reads channel $1: name, provider, policy, policy_override, paused, updated_at.
	//
	//go:embed channel_get.sql
	ChannelGet string

	// ChannelLock is ChannelGet that locks the row for a change in the same transaction.
	//
	//go:embed channel_lock.sql
	ChannelLock string

	// ChannelList reads every channel as ChannelGet does, by name.
	//
	//go:embed channel_list.sql
	ChannelList string

	// ChannelCounts counts intents by channel and status, of channel $1 (NULL:
	// every registered channel): live states from their partial indexes,
	// settled states from the counts kept as changes happen.
	//
	//go:embed channel_counts.sql
	ChannelCounts string

	// ChannelSetOverride stores $2 as channel $1's policy override.
	//
	//go:embed channel_set_override.sql
	ChannelSetOverride string

	// ChannelSetPaused pauses or resumes ($2) channel $1.
	//
	//go:embed channel_set_paused.sql
	ChannelSetPaused string

	// ChannelExists reports whether channel $1 is registered.
	//
	//go:embed channel_exists.sql
	ChannelExists string

	// ChannelRedact lists each channel's name and redacted payload fields.
	//
	//go:embed channel_redact.sql
	ChannelRedact string

	// ChannelGauges reads, per channel, the oldest due PENDING intent's wait,
	// SENDING past lease, IN_DOUBT, and settled intents by delivery, without
	// reading history.
	//
	//go:embed channel_gauges.sql
	ChannelGauges string
)

//go:embed list_events.sql
var listEventsSQL string

// EventFilter selects a page of provider events for ListEvents. A nil field
// does not filter.
type EventFilter struct {
	After       int64 // ids above this one
	Limit       int64
	OrphansOnly bool
	Channel     *string
	IntentID    *int64
	Channels    []string // among these channels; nil: every channel
}

// ListEvents reads up to f.Limit provider events by id: id, provider,
// event_id, channel, intent_id, object_ref, type, status, delivery, detail,
// outcome, payload, received_at.
func ListEvents(ctx context.Context, db DB, f EventFilter) (pgx.Rows, error) {
	sql, args := f.statement()
	return db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// statement builds ListEvents's statement and its arguments.
func (f EventFilter) statement() (string, []any) {
	s := newStmt(listEventsSQL, f.After, f.Limit)
	if f.OrphansOnly {
		s.and("intent_id IS NULL")
	}
	if f.Channel != nil {
		s.and("channel = %s", *f.Channel)
	}
	if f.IntentID != nil {
		s.and("intent_id = %s", *f.IntentID)
	}
	if f.Channels != nil {
		s.and("channel = ANY (%s::text[])", f.Channels)
	}
	s.raw("ORDER BY id\nLIMIT $2")
	return s.sql(), s.args
}
