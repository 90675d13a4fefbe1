package readdb

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed select_intent.sql
var selectIntentSQL string

//go:embed intent_channel.sql
var intentChannelSQL string

//go:embed intent_traceparent.sql
var intentTraceparentSQL string

// SelectIntent reads intent id, whole; pgx.ErrNoRows when there is none.
func SelectIntent(ctx context.Context, db query.DB, id int64) (effectdtype.IntentRow, error) {
	return query.ScanIntent(db.QueryRow(ctx, selectIntentSQL, id))
}

// IntentTraceparent reads the producer's trace context kept with intent id,
// "" when it has none, and when the intent was created; pgx.ErrNoRows when
// there is no such intent.
func IntentTraceparent(ctx context.Context, db query.DB, id int64) (traceparent string, created time.Time, err error) {
	var tp pgtype.Text
	err = db.QueryRow(ctx, intentTraceparentSQL, id).Scan(&tp, &created)
	return tp.String, created, err
}

// IntentChannel reads the channel of intent id; pgx.ErrNoRows when there is none.
func IntentChannel(ctx context.Context, db query.DB, id int64) (channel string, err error) {
	err = db.QueryRow(ctx, intentChannelSQL, id).Scan(&channel)
	return channel, err
}

//go:embed list_intents.sql
var listIntentsHead string

// intentList is a filter as ListIntents and ListIntentsScopeAtOnce read it.
type intentList struct {
	effectdtype.IntentFilter
	// scopeAtOnce: the scope is one condition (channel = ANY), never read
	// channel by channel (perChannel), as the distributed mode reads it
	// (ListIntentsScopeAtOnce).
	scopeAtOnce bool
}

// perChannel reports whether f's statement reads a page of a rare status or
// delivery among a scope's channels channel by channel: a LATERAL join with a
// LIMIT inside, which Citus refuses ("cannot push down this subquery"), so
// in the distributed mode (scopeAtOnce) the scope is one condition, channel = ANY,
// and each shard's partial index is read once for the whole scope. A keyed
// read is never read channel by channel: its key finds a few rows in any scope.
func (f intentList) perChannel() bool {
	rare := (f.Status != nil && rareWords[*f.Status]) || (f.Delivery != nil && rareWords[*f.Delivery])
	return rare && f.Channels != nil && f.Channel == nil && !f.scopeAtOnce && !f.keyed()
}

// ListIntents reads up to f.Limit intents by id, whole, and hands each to
// yield in turn until yield returns false; the rows after it are not read.
// Its statement holds a condition only for each filter present, and it is
// planned for its values at every call (an unnamed statement): a prepared
// catch-all (`$n IS NULL OR col = $n`) would switch to a generic plan after
// five calls and lose the index a rare value needs. A statement that finds
// its rows by key (keyed) is the exception: it is prepared and keeps its
// plan.
//
// A list from a time on (Since) starts at the last id marked before that
// time (id_marks), so it reads the rows added since, not the history before.
func ListIntents(ctx context.Context, db query.DB, f effectdtype.IntentFilter, yield func(effectdtype.IntentRow) bool) error {
	return listIntents(ctx, db, intentList{IntentFilter: f}, yield)
}

// ListIntentsScopeAtOnce is ListIntents as the distributed mode runs it: a
// scope of channels is one condition read once on each shard (scopeAtOnce).
func ListIntentsScopeAtOnce(ctx context.Context, db query.DB, f effectdtype.IntentFilter, yield func(effectdtype.IntentRow) bool) error {
	return listIntents(ctx, db, intentList{IntentFilter: f, scopeAtOnce: true}, yield)
}

// listIntents runs f's statement and hands its rows to yield.
func listIntents(ctx context.Context, db query.DB, f intentList, yield func(effectdtype.IntentRow) bool) error {
	if f.Since != nil {
		from, err := idBefore(ctx, db, *f.Since)
		if err != nil {
			return err
		}
		f.After = max(f.After, from)
	}
	sql, args := f.statement()
	if !f.keyed() {
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		it, err := query.ScanIntent(rows)
		if err != nil {
			return err
		}
		if !yield(it) {
			break
		}
	}
	return rows.Err()
}

// keyed reports whether f finds its rows by key, a search or an event id:
// every day partition is probed through its (event_id, channel) key,
// intents_provider_ref or intents_hashed_key, whatever the value, so a plan
// made for the value is no better than the generic one. ListIntents runs such
// a statement in the connection's own mode (pgx's statement cache: a named
// statement, prepared once per connection), so PostgreSQL keeps its generic
// plan after five runs. Planned for its values at every call, the plan over
// every day partition and its indexes cost ten times the probes, and more
// the more days held rows (issue 20: the fastest search 2.8–3.4 times slower
// at 10 M retained intents than at 1 M).
func (f intentList) keyed() bool { return f.Search != nil || f.EventID != nil }

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
// instead of every such row of those channels (on one PostgreSQL: see
// perChannel). The rows a key finds (keyed) are all found first, then sorted:
// they are a few whatever history holds, and a plan that reads in id order
// until the page is full (the generic plan of a LIMIT $2 it cannot see) would
// read every row of every day to find them.
func (f intentList) statement() (string, []any) {
	perChannel, keyed := f.perChannel(), f.keyed()
	s := query.NewStmt("", f.After, f.Limit)
	if perChannel {
		s.Raw("SELECT i.* FROM unnest(" + s.Arg(f.Channels) + "::text[]) AS scope(channel) CROSS JOIN LATERAL (\n")
	}
	if keyed {
		s.Raw("WITH keyed AS MATERIALIZED (\n")
	}
	s.Raw(listIntentsHead)
	if f.Status != nil {
		s.And(s.Word("status", *f.Status))
	}
	if f.Delivery != nil {
		s.And(s.Word("delivery", *f.Delivery))
	}
	if f.Channel != nil {
		s.And("channel = %s", *f.Channel)
	}
	switch {
	case perChannel:
		s.And("channel = scope.channel")
	case f.Channels != nil:
		s.And("channel = ANY (%s::text[])", f.Channels)
	}
	if f.EventID != nil {
		s.And("event_id = %s", *f.EventID)
	}
	if f.Since != nil {
		s.And("created_at >= %s", *f.Since)
	}
	if f.Until != nil {
		s.And("created_at < %s", *f.Until)
	}
	if f.Search != nil {
		s.And(searchCondition(*f.Search, s.Arg))
	}
	if keyed {
		s.Raw(")\nSELECT * FROM keyed\n")
	}
	s.Raw("ORDER BY id\nLIMIT $2")
	if perChannel {
		s.Raw("\n) AS i\nORDER BY i.id\nLIMIT $2")
	}
	return s.SQL(), s.Args
}

// searchCondition matches q exactly against the event id, the idempotency key
// and the provider reference, each through an index: the event id through the
// unique (event_id, channel) key; a key <channel>:<event_id> through the same
// key; a hashed key (<channel>:sha256:<hex>) through intents_hashed_key; a
// provider reference through intents_provider_ref. A branch q cannot match is
// left out, so each day partition is probed once per branch that can.
func searchCondition(q string, arg func(any) string) string {
	p := arg(q)
	parts := []string{"event_id = " + p}
	if channel, event, ok := strings.Cut(q, ":"); ok {
		parts = append(parts, fmt.Sprintf("(channel = %s AND event_id = %s AND idempotency_key = %s)", arg(channel), arg(event), p))
	}
	if strings.Contains(q, hashedKeyMark) {
		parts = append(parts, fmt.Sprintf("(idempotency_key = %s AND idempotency_key LIKE '%%%s%%')", p, hashedKeyMark))
	}
	parts = append(parts, "provider_ref = "+p)
	return "(" + strings.Join(parts, "\n       OR ") + ")"
}

// hashedKeyMark is in every hashed idempotency key (<channel>:sha256:<hex>),
// and the predicate of intents_hashed_key.
const hashedKeyMark = ":sha256:"
