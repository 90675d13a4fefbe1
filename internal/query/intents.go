package query

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// The reads and writes of whole intents (effectd.intents) that producers and
// operators make. Every statement that returns whole intents spells out the
// select list of intent_columns.sql, in the order scanIntent reads it
// (TestIntentColumns holds them to it).

//go:embed select_intent.sql
var selectIntentSQL string

//go:embed intent_channel.sql
var intentChannelSQL string

//go:embed operate.sql
var operateSQL string

//go:embed maybe_applied.sql
var maybeAppliedSQL string

//go:embed enqueue.sql
var enqueueSQL string

//go:embed enqueue_traced.sql
var enqueueTracedSQL string

//go:embed intent_traceparent.sql
var intentTraceparentSQL string

// scanIntent reads one whole intent. A time that Go and JSON cannot carry does
// not fail the read: it is clamped and named in Problems.
func scanIntent(row pgx.Row) (effectdtype.IntentRow, error) {
	var r effectdtype.IntentRow
	next, lease, claimed := looseTime{Field: "next_attempt_at"}, looseTime{Field: "lease_expires_at"}, looseTime{Field: "claimed_at"}
	occurred, created, updated := looseTime{Field: "occurred_at"}, looseTime{Field: "created_at"}, looseTime{Field: "updated_at"}
	delivery := looseTime{Field: "delivery_at"}
	err := row.Scan(&r.ID, &r.EventID, &r.Channel, &r.Payload, &r.Status, &r.Attempts, &next,
		&lease, &claimed, &r.IdempotencyKey, &r.ProviderRef, &r.LastError, &r.OrderingKey,
		&occurred, &created, &updated, &r.Delivery, &r.DeliveryDetail, &delivery)
	r.NextAttemptAt, r.LeaseExpiresAt, r.ClaimedAt = next.Time, lease.ptr(), claimed.ptr()
	r.OccurredAt, r.CreatedAt, r.UpdatedAt, r.DeliveryAt = occurred.ptr(), created.Time, updated.Time, delivery.ptr()
	r.Problems = problems(&next, &lease, &claimed, &occurred, &created, &updated, &delivery)
	return r, err
}

// collectIntents reads every row of rows as a whole intent.
func collectIntents(rows pgx.Rows) ([]effectdtype.IntentRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (effectdtype.IntentRow, error) { return scanIntent(row) })
}

// SelectIntent reads intent id, whole; pgx.ErrNoRows when there is none.
func SelectIntent(ctx context.Context, db DB, id int64) (effectdtype.IntentRow, error) {
	return scanIntent(db.QueryRow(ctx, selectIntentSQL, id))
}

// IntentTraceparent reads the producer's trace context kept with intent id,
// "" when it has none, and when the intent was created; pgx.ErrNoRows when
// there is no such intent.
func IntentTraceparent(ctx context.Context, db DB, id int64) (traceparent string, created time.Time, err error) {
	var tp pgtype.Text
	err = db.QueryRow(ctx, intentTraceparentSQL, id).Scan(&tp, &created)
	return tp.String, created, err
}

// IntentChannel reads the channel of intent id; pgx.ErrNoRows when there is none.
func IntentChannel(ctx context.Context, db DB, id int64) (channel string, err error) {
	err = db.QueryRow(ctx, intentChannelSQL, id).Scan(&channel)
	return channel, err
}

// Transition is an operator's transition of one intent, as Operate applies it.
type Transition struct {
	IntentID int64
	Key      string             // the idempotency key it was read with: the fence, with From and Attempts
	From     statemachine.State // the status it was read in: the fence, with Attempts
	Attempts int
	To       statemachine.State
	// ProviderRef, when not nil, becomes the intent's provider reference
	// (an operator's "resolve as sent").
	ProviderRef *string
}

// Operate applies t to its intent as a fenced compare-and-set: the row changes
// only while it is still in t.From with t.Attempts, and never while it is
// SENDING under a live lease. SENT makes an unknown delivery accepted in the
// same statement. It returns the intent after, whole, or pgx.ErrNoRows when
// the fence held it back.
func Operate(ctx context.Context, db DB, t Transition) (effectdtype.IntentRow, error) {
	return scanIntent(db.QueryRow(ctx, operateSQL, t.IntentID, t.From, t.Attempts, t.To, t.ProviderRef, t.Key))
}

// OperateBucket is Operate in the distributed mode: it reads the intent's
// bucket first (IntentBucket), then applies t on its bucket's shard.
func OperateBucket(ctx context.Context, db DB, t Transition) (effectdtype.IntentRow, error) {
	bucket, err := IntentBucket(ctx, db, t.IntentID)
	if err != nil {
		return effectdtype.IntentRow{}, err
	}
	return scanIntent(db.QueryRow(ctx, operateBucketSQL, t.IntentID, t.From, t.Attempts, t.To, t.ProviderRef, bucket, t.Key))
}

// CallHistory is what the provider's key window rule needs of an intent.
type CallHistory struct {
	Provider string    // the channel's provider; "" when the channel is not registered
	Now      time.Time // the database's clock
	Called   bool      // a provider call was ever made for the intent
}

// MaybeApplied reads, for intent id of channel, whether its effect may have
// been applied: the channel's provider, the database's clock, and whether a
// call was ever made.
func MaybeApplied(ctx context.Context, db DB, id int64, channel string) (h CallHistory, err error) {
	err = db.QueryRow(ctx, maybeAppliedSQL, id, channel).Scan(&h.Provider, &h.Now, &h.Called)
	return h, err
}

// RowQuerier runs a statement that returns one row: a pgx.Tx, a *pgxpool.Pool
// or a producer's own transaction adapted to it.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewIntent is an intent as Enqueue records it; a nil field is not given.
type NewIntent struct {
	EventID     string
	Channel     string
	Payload     string // JSON text
	OccurredAt  *time.Time
	NotBefore   *time.Time
	OrderingKey *string
	// Traceparent is the producer's trace context (W3C traceparent): set,
	// it is effectd.traceparent for the rest of the transaction and the
	// intent keeps it; "" leaves the transaction's setting as it is.
	Traceparent string
}

// Enqueue records n through effectd.enqueue, in the caller's transaction. It
// reports whether the intent is new (false: a duplicate of its event id and
// channel, which changes nothing). effectd.enqueue's refusals of bad input
// come back as *pgconn.PgError.
func Enqueue(ctx context.Context, db RowQuerier, n NewIntent) (inserted bool, err error) {
	if n.Traceparent != "" {
		err = db.QueryRow(ctx, enqueueTracedSQL, n.EventID, n.Channel, n.Payload, n.OccurredAt, n.NotBefore, n.OrderingKey, n.Traceparent).Scan(&inserted)
		return inserted, err
	}
	err = db.QueryRow(ctx, enqueueSQL, n.EventID, n.Channel, n.Payload, n.OccurredAt, n.NotBefore, n.OrderingKey).Scan(&inserted)
	return inserted, err
}

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

	// scopeAtOnce: the scope is one condition (channel = ANY), never read
	// channel by channel (perChannel), as the distributed mode reads it (set
	// by Distributed).
	scopeAtOnce bool
}

// perChannel reports whether f's statement reads a page of a rare status or
// delivery among a scope's channels channel by channel: a LATERAL join with a
// LIMIT inside, which Citus refuses ("cannot push down this subquery"), so
// in the distributed mode (scopeAtOnce) the scope is one condition, channel = ANY,
// and each shard's partial index is read once for the whole scope. A keyed
// read is never read channel by channel: its key finds a few rows in any scope.
func (f IntentFilter) perChannel() bool {
	rare := (f.Status != nil && rareWords[*f.Status]) || (f.Delivery != nil && rareWords[*f.Delivery])
	return rare && f.Channels != nil && f.Channel == nil && !f.scopeAtOnce && !f.keyed()
}

// Distributed returns f as ListIntents runs it in the distributed mode:
// the scope one condition read once on each shard (scopeAtOnce).
func (f IntentFilter) Distributed() IntentFilter {
	f.scopeAtOnce = true
	return f
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
func ListIntents(ctx context.Context, db DB, f IntentFilter, yield func(effectdtype.IntentRow) bool) error {
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
		it, err := scanIntent(rows)
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
func (f IntentFilter) keyed() bool { return f.Search != nil || f.EventID != nil }

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
func (f IntentFilter) statement() (string, []any) {
	perChannel, keyed := f.perChannel(), f.keyed()
	s := newStmt("", f.After, f.Limit)
	if perChannel {
		s.raw("SELECT i.* FROM unnest(" + s.arg(f.Channels) + "::text[]) AS scope(channel) CROSS JOIN LATERAL (\n")
	}
	if keyed {
		s.raw("WITH keyed AS MATERIALIZED (\n")
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
	if keyed {
		s.raw(")\nSELECT * FROM keyed\n")
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
