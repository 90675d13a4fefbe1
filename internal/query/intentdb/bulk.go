package intentdb

import (
	"context"
	_ "embed"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// effectd.bulk_snapshots and effectd.bulk_rows: an operator's bulk action,
// frozen over the intents it selects, then applied once.

//go:embed bulk_prune.sql
var bulkPruneSQL string

//go:embed bulk_create.sql
var bulkCreateSQL string

//go:embed bulk_drop_extra.sql
var bulkDropExtraSQL string

//go:embed bulk_set_matched.sql
var bulkSetMatchedSQL string

//go:embed bulk_sample.sql
var bulkSampleSQL string

//go:embed bulk_claim.sql
var bulkClaimSQL string

//go:embed bulk_state.sql
var bulkStateSQL string

//go:embed bulk_rows.sql
var bulkRowsSQL string

//go:embed bulk_finish.sql
var bulkFinishSQL string

// PruneBulk deletes the snapshots, with their rows, that expired more than
// keep ago.
func PruneBulk(ctx context.Context, db query.DB, keep time.Duration) error {
	_, err := db.Exec(ctx, bulkPruneSQL, keep.String())
	return err
}

// NewBulk is a bulk snapshot as CreateBulk records it, before its rows.
type NewBulk struct {
	Action   string // retry | cancel | resolve
	As       string // with resolve: resend | skip; "" = none
	Filter   []byte // JSON: what the operator asked for, with the channels it was frozen among
	Reason   string
	Actor    string
	Lifetime time.Duration // how long it may be applied
}

// CreateBulk records snapshot b, with no rows yet, and returns its id and
// when it expires.
func CreateBulk(ctx context.Context, db query.DB, b NewBulk) (id string, expiresAt time.Time, err error) {
	err = db.QueryRow(ctx, bulkCreateSQL, b.Action, b.As, b.Filter, b.Reason, b.Actor, b.Lifetime.String()).Scan(&id, &expiresAt)
	return id, expiresAt, err
}

// DropBulkExtra drops the last row of snapshot, frozen past the limit only to
// know that more intents matched.
func DropBulkExtra(ctx context.Context, db query.DB, snapshot string) error {
	_, err := db.Exec(ctx, bulkDropExtraSQL, snapshot)
	return err
}

// SetBulkMatched records that snapshot froze matched intents.
func SetBulkMatched(ctx context.Context, db query.DB, snapshot string, matched int) error {
	_, err := db.Exec(ctx, bulkSetMatchedSQL, snapshot, matched)
	return err
}

// SampleBulk reads the first limit intents of snapshot by id, whole, as they
// are now.
func SampleBulk(ctx context.Context, db query.DB, snapshot string, limit int) ([]effectdtype.IntentRow, error) {
	rows, err := db.Query(ctx, bulkSampleSQL, snapshot, limit)
	if err != nil {
		return nil, err
	}
	return query.CollectIntents(rows)
}

// BulkAction is what a snapshot does to each of its rows.
type BulkAction struct {
	Action string
	As     string // "" = none
	Reason string
}

// ClaimBulk marks snapshot id applied by actor, once and before it expires,
// and returns its action; pgx.ErrNoRows when it was applied before or has
// expired (or does not exist).
func ClaimBulk(ctx context.Context, db query.DB, id, actor string) (a BulkAction, err error) {
	err = db.QueryRow(ctx, bulkClaimSQL, id, actor).Scan(&a.Action, &a.As, &a.Reason)
	return a, err
}

// BulkState is a stored snapshot as an apply checks it.
type BulkState struct {
	Actor     string
	Filter    []byte     // JSON, as CreateBulk stored it
	AppliedAt *time.Time // nil: never applied
	ExpiresAt time.Time
}

// SelectBulk reads snapshot id; pgx.ErrNoRows when there is none.
func SelectBulk(ctx context.Context, db query.DB, id string) (st BulkState, err error) {
	err = db.QueryRow(ctx, bulkStateSQL, id).Scan(&st.Actor, &st.Filter, &st.AppliedAt, &st.ExpiresAt)
	return st, err
}

// FrozenRow is an intent frozen in a snapshot: the state it was frozen in,
// its idempotency key ("" when frozen before migration 023), and the channel
// of the intent with its id now ("" when there is none).
type FrozenRow struct {
	ID       int64              `db:"id"`
	Status   statemachine.State `db:"status"`
	Attempts int                `db:"attempts"`
	Key      string             `db:"key"`
	Channel  string             `db:"channel"`
}

//go:embed bulk_rows_bucket.sql
var bulkRowsBucketSQL string

// FrozenRowBucket is a FrozenRow of the distributed mode, with its intent's
// bucket (-1 when the intent is gone).
type FrozenRowBucket struct {
	FrozenRow
	Bucket int64 `db:"bucket"`
}

// BulkRowsBucket is BulkRows in the distributed mode, with each intent's bucket.
func BulkRowsBucket(ctx context.Context, db query.DB, snapshot string) ([]FrozenRowBucket, error) {
	rows, err := db.Query(ctx, bulkRowsBucketSQL, snapshot)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[FrozenRowBucket])
}

// BulkRows lists the intents frozen in snapshot, by id.
func BulkRows(ctx context.Context, db query.DB, snapshot string) ([]FrozenRow, error) {
	rows, err := db.Query(ctx, bulkRowsSQL, snapshot)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[FrozenRow])
}

// FinishBulk records that snapshot id applied applied intents and skipped skipped.
func FinishBulk(ctx context.Context, db query.DB, id string, applied, skipped int) error {
	_, err := db.Exec(ctx, bulkFinishSQL, id, applied, skipped)
	return err
}

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
func FreezeBulk(ctx context.Context, db query.DB, f BulkFilter) (int64, error) {
	s := query.NewStmt(bulkFreezeSQL, f.Snapshot, f.Limit)
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = s.Word("status", st)
	}
	if len(states) == 0 {
		states = []string{"false"}
	}
	s.And("(" + strings.Join(states, " OR ") + ")")
	if f.Channel != nil {
		s.And("channel = %s", *f.Channel)
	}
	if f.EventIDPrefix != nil {
		s.And("starts_with(event_id, %s)", *f.EventIDPrefix)
	}
	if f.Channels != nil {
		s.And("channel = ANY (%s::text[])", f.Channels)
	}
	s.Raw("ORDER BY id\nLIMIT $2")
	tag, err := db.Exec(ctx, s.SQL(), append([]any{pgx.QueryExecModeExec}, s.Args...)...)
	return tag.RowsAffected(), err
}
