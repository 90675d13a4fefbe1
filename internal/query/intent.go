package query

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
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
var listIntentsHead string

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

// ListIntents reads up to f.Limit intents by id, whole (dispatcher.ScanIntent
// reads each row). Its statement holds a condition only for each filter
// present, and it is planned for its values at every call (an unnamed
// statement): a prepared catch-all (`$n IS NULL OR col = $n`) would switch to
// a generic plan after five calls and lose the index a rare value needs.
//
// A list from a time on (Since) starts at the last id marked before that
// time (id_marks), so it reads the rows added since, not the history before.
func ListIntents(ctx context.Context, db DB, f IntentFilter) (pgx.Rows, error) {
	if f.Since != nil {
		var from int64
		if err := db.QueryRow(ctx, idBeforeSQL, *f.Since).Scan(&from); err != nil {
			return nil, err
		}
		f.After = max(f.After, from)
	}
	sql, args := f.statement()
	return db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// rareWords are the values of status and delivery that few rows hold at any
// time, whatever history holds; each has partial indexes in id order, overall
// and within a channel (migration 011).
var rareWords = map[string]bool{
	"FAILED": true, "SKIPPED": true, "CANCELLED": true, "IN_DOUBT": true,
	"accepted": true, "undelivered": true,
}

// statement builds ListIntents's statement and its arguments. A page of a
// rare status or delivery among a scope's channels is read channel by channel,
// each in id order from its index, then merged: one index range per channel
// instead of every such row of those channels.
func (f IntentFilter) statement() (string, []any) {
	rare := (f.Status != nil && rareWords[*f.Status]) || (f.Delivery != nil && rareWords[*f.Delivery])
	perChannel := rare && f.Channels != nil && f.Channel == nil
	s := newStmt("", f.After, f.Limit)
	if perChannel {
		s.raw("SELECT i.* FROM unnest(" + s.arg(f.Channels) + "::text[]) AS scope(channel) CROSS JOIN LATERAL (\n")
	}
	s.raw(listIntentsHead)
	if f.Status != nil {
		s.and(s.word("status", *f.Status))
	}
	if f.Delivery != nil {
		s.and(s.word("delivery", *f.Delivery))
	}
	if f.Channel != nil {
		s.and("channel = %s", *f.Channel)
	}
	switch {
	case perChannel:
		s.and("channel = scope.channel")
	case f.Channels != nil:
		s.and("channel = ANY (%s::text[])", f.Channels)
	}
	if f.EventID != nil {
		s.and("event_id = %s", *f.EventID)
	}
	if f.Since != nil {
		s.and("created_at >= %s", *f.Since)
	}
	if f.Until != nil {
		s.and("created_at < %s", *f.Until)
	}
	if f.Search != nil {
		s.and(searchCondition(*f.Search, s.arg))
	}
	s.raw("ORDER BY id\nLIMIT $2")
	if perChannel {
		s.raw("\n) AS i\nORDER BY i.id\nLIMIT $2")
	}
	return s.sql(), s.args
}

// searchCondition matches q exactly against the event id, the idempotency key
// and the provider reference, each through an index: the event id through the
// unique (event_id, channel) key; a key <channel>:<event_id> through the same
// key; a hashed key (<channel>:sha256:<hex>) through intents_hashed_key; a
// provider reference through intents_provider_ref.
func searchCondition(q string, arg func(any) string) string {
	p := arg(q)
	parts := []string{"event_id = " + p}
	if channel, event, ok := strings.Cut(q, ":"); ok {
		parts = append(parts, fmt.Sprintf("(channel = %s AND event_id = %s AND idempotency_key = %s)", arg(channel), arg(event), p))
	}
	parts = append(parts,
		fmt.Sprintf("(idempotency_key = %s AND idempotency_key LIKE '%%:sha256:%%')", p),
		"provider_ref = "+p)
	return "(" + strings.Join(parts, "\n       OR ") + ")"
}
