package intentdb

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// The dispatcher's writes of effectd.intents along a send: the claim that
// leases due rows, the completion of each call, the reconciler's take and
// settlement of expired leases, and the pruning of settled rows. Each write is
// a compare-and-set fenced on the row's status and attempt (and, where an id
// may be handed out again, its idempotency key).

//go:embed claim.sql
var claimSQL string

//go:embed take_expired.sql
var takeExpiredSQL string

//go:embed release_lease.sql
var releaseLeaseSQL string

//go:embed reconcile_read.sql
var reconcileReadSQL string

//go:embed settle.sql
var settleSQL string

//go:embed prune.sql
var pruneSQL string

// ClaimParams says what Claim takes: up to Limit due PENDING intents of
// Channel, each under a lease of Lease, within the channel's shared rate.
type ClaimParams struct {
	Channel       string
	Lease         time.Duration
	Limit         int
	RatePerSecond float64 // rate tokens a second, shared by every instance; 0: no limit
	Burst         float64 // rate tokens saved up at most
}

// Claimed is an intent Claim moved to SENDING, with what its call needs.
type Claimed struct {
	ID         int64
	EventID    string
	Payload    json.RawMessage
	Attempts   int32 // the attempt the call is made under: the fence of its completion
	Key        string
	CreatedAt  time.Time
	OccurredAt time.Time // created_at when the producer gave none
	// Problem says why a stored time cannot be carried (infinity, a year
	// past 9999), clamped in CreatedAt or OccurredAt; "" = none. Such a row
	// is not called.
	Problem string
	Bucket  int64 // distributed mode: the intent's bucket (ClaimBucket); 0 otherwise
	// Traceparent is the producer's trace context kept at enqueue; "" = none.
	Traceparent string
}

// Claim moves up to p.Limit due PENDING intents of a channel that is not
// paused to SENDING under a lease, the earliest due first and none behind an
// older unsettled intent of its ordering key, spending the channel's shared
// rate tokens. It returns the intents claimed and the rate tokens held before
// them (0 without a limit). Every row claimed is SENDING once it returns: a
// time Go cannot carry is clamped and named in Problem rather than failing
// the read.
func Claim(ctx context.Context, db query.DB, p ClaimParams) (claimed []Claimed, avail float64, err error) {
	rows, err := db.Query(ctx, claimSQL, p.Channel, query.Interval(p.Lease), p.Limit, p.RatePerSecond, p.Burst)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	claimed = make([]Claimed, 0, p.Limit)
	for rows.Next() {
		var c Claimed
		var traceparent pgtype.Text
		created, occurred := query.LooseTime{Field: "created_at"}, query.LooseTime{Field: "occurred_at"}
		if err := rows.Scan(&avail, &c.ID, &c.EventID, &c.Payload, &c.Attempts, &c.Key, &created, &occurred, &traceparent); err != nil {
			return claimed, 0, err
		}
		if c.ID == 0 {
			continue // nothing claimed: the row only reports the bucket
		}
		c.CreatedAt, c.OccurredAt, c.Traceparent = created.Time, occurred.Time, traceparent.String
		c.Problem = cmp.Or(occurred.Problem, created.Problem)
		claimed = append(claimed, c)
	}
	return claimed, avail, rows.Err()
}

// Unsettled is a SENDING intent whose lease expired, or an IN_DOUBT one: a
// row whose call may or may not have taken effect, for a reconciler to settle.
type Unsettled struct {
	ID        int64
	EventID   string
	Channel   string
	Payload   json.RawMessage
	Attempts  int32 // the fence of the settlement, with Status and Key
	Key       string
	CreatedAt time.Time
	ClaimedAt time.Time // CreatedAt when never claimed
	Status    statemachine.State
	Bucket    int64 // distributed mode: the intent's bucket (TakeExpiredBucket); 0 otherwise
	// Traceparent is the producer's trace context kept at enqueue; "" = none.
	Traceparent string
}

// scanUnsettled reads the row of an Unsettled, then more, in the order of
// take_expired.sql and reconcile_read.sql.
func scanUnsettled(row pgx.Row, more ...any) (Unsettled, error) {
	var u Unsettled
	var traceparent pgtype.Text
	created, claimed := query.LooseTime{Field: "created_at"}, query.LooseTime{Field: "claimed_at"}
	err := row.Scan(append([]any{&u.ID, &u.EventID, &u.Channel, &u.Payload, &u.Attempts, &u.Key, &created, &claimed, &u.Status, &traceparent}, more...)...)
	u.CreatedAt, u.ClaimedAt, u.Traceparent = created.Time, claimed.Time, traceparent.String
	return u, err
}

// TakeExpired takes up to limit SENDING intents of channels whose lease
// expired, extending each lease by lease so that one reconciler settles each,
// and returns them.
func TakeExpired(ctx context.Context, db query.DB, limit int, channels []string, lease time.Duration) ([]Unsettled, error) {
	rows, err := db.Query(ctx, takeExpiredSQL, limit, channels, query.Interval(lease))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Unsettled, error) { return scanUnsettled(row) })
}

// ReleaseLease ends the lease of u now, while it is still SENDING under the
// same attempt and key, so that the next reconciler takes it at once.
func ReleaseLease(ctx context.Context, db query.DB, u Unsettled) error {
	_, err := db.Exec(ctx, releaseLeaseSQL, u.ID, u.Attempts, u.Key)
	return err
}

// SelectUnsettled reads intent id as an operator's reconcile needs it, with
// the end of its lease while that lease is live (nil otherwise); pgx.ErrNoRows
// when there is no such intent. The intent may be in any status.
func SelectUnsettled(ctx context.Context, db query.DB, id int64) (u Unsettled, leaseUntil *time.Time, err error) {
	u, err = scanUnsettled(db.QueryRow(ctx, reconcileReadSQL, id), &leaseUntil)
	return u, leaseUntil, err
}

// Prune deletes up to limit settled intents of channel (never IN_DOUBT) last
// changed more than olderThan ago, with their attempts, and returns how many
// intents it deleted.
func Prune(ctx context.Context, db query.DB, channel string, limit int, olderThan time.Duration) (int64, error) {
	tag, err := db.Exec(ctx, pruneSQL, channel, limit, query.Interval(olderThan))
	return tag.RowsAffected(), err
}

//go:embed prune_bucket.sql
var pruneBucketSQL string

// PruneBucket is Prune on one bucket of the distributed mode: the intents it
// deletes leave the settled counts in the same statement.
func PruneBucket(ctx context.Context, db query.DB, channel string, limit int, olderThan time.Duration, bucket int) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, pruneBucketSQL, channel, limit, query.Interval(olderThan), bucket).Scan(&n)
	return n, err
}

//go:embed complete.sql
var completeSQL string

// Completion is the outcome of one provider call, as Complete writes it.
type Completion struct {
	ID            int64
	Key           string        // the intent's idempotency key: the fence names the intent, not only its id
	CreatedAt     time.Time     // the intent's created_at, which names the day partition its row is in
	Attempts      int32         // the attempt the call was made under: the fence
	Status        string        // the status to set; SENDING keeps the row for the reconciler, its lease ending LookAfter from now
	LookAfter     time.Duration // SENDING: the channel's grace after the call (policy.GraceAfterCall)
	ProviderRef   string        // "": keep the row's
	LastError     string        // "": none
	NextAttemptAt time.Time     // when the row is next due, for a retry
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
	lookAfter               []time.Duration
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
	b.lookAfter = append(b.lookAfter, c.LookAfter)
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
	ID       int64
	Attempts int32 // the attempt of the completion: one batch may hold two of one intent
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
func Complete(ctx context.Context, db query.DB, b *CompleteBatch, recheck bool) ([]Fenced, error) {
	rows, err := db.Query(ctx, completeSQL, b.ids, b.attempts, b.statuses, b.refs, b.errs,
		b.next, b.started, b.finished, b.outcomes, b.called, b.delivery, recheck, b.keys, b.oldest, b.newest, b.lookAfter)
	if err != nil {
		return nil, err
	}
	return scanFenced(rows)
}

// scanFenced reads the rows of complete.sql and complete_bucket.sql.
func scanFenced(rows pgx.Rows) ([]Fenced, error) {
	defer rows.Close()
	var fenced []Fenced
	for rows.Next() {
		var f Fenced
		var why string
		if err := rows.Scan(&f.ID, &f.Attempts, &why); err != nil {
			return nil, err
		}
		f.SettledEarly, f.Raced, f.Lost = why == "early", why == "raced", why == "lost"
		fenced = append(fenced, f)
	}
	return fenced, rows.Err()
}

// SettleParams is one reconciler or lookup decision, as Settle writes it.
type SettleParams struct {
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
func Settle(ctx context.Context, db query.DB, s SettleParams) (applied bool, err error) {
	var n int
	err = db.QueryRow(ctx, settleSQL, s.IntentID, s.Attempts, s.From, s.To, query.NullString(s.ProviderRef),
		query.NullString(s.Error), s.StartedAt, s.Outcome, s.Key).Scan(&n)
	return n == 1, err
}
