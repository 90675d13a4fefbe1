package accessdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed approval_columns.sql
var approvalColumnsSQL string

//go:embed approval_insert.sql
var approvalInsertSQL string

//go:embed approval_expire.sql
var approvalExpireSQL string

//go:embed approval_get.sql
var approvalGetSQL string

//go:embed approval_lock.sql
var approvalLockSQL string

//go:embed approval_pending.sql
var approvalPendingSQL string

//go:embed approval_decide.sql
var approvalDecideSQL string

// withApprovalColumns puts the select list of approval_columns.sql (its
// comment dropped) in place of {{columns}}.
func withApprovalColumns(sql string) string {
	var cols []string
	for _, line := range strings.Split(approvalColumnsSQL, "\n") {
		if !strings.HasPrefix(line, "--") {
			cols = append(cols, line)
		}
	}
	return strings.ReplaceAll(sql, "{{columns}}", strings.Join(cols, "\n"))
}

var (
	approvalGet     = withApprovalColumns(approvalGetSQL)
	approvalLock    = withApprovalColumns(approvalLockSQL)
	approvalPending = withApprovalColumns(approvalPendingSQL)
)

// NewApproval is an approval request as InsertApproval records it.
type NewApproval struct {
	Channel, Action, Requester, Reason string
	Intent                             *effectdtype.ApprovalTarget // nil: not an intent's action
	Parameters                         json.RawMessage
	Expiry                             time.Duration
}

// InsertApproval records a pending approval request and returns its id.
func InsertApproval(ctx context.Context, db query.DB, a NewApproval) (id int64, err error) {
	var intentID *int64
	var eventID, status, key *string
	var attempts *int
	if t := a.Intent; t != nil {
		intentID, eventID, status, attempts, key = &t.ID, &t.EventID, &t.Status, &t.Attempts, &t.IdempotencyKey
	}
	params := a.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	err = db.QueryRow(ctx, approvalInsertSQL, a.Channel, a.Action, a.Requester, a.Reason, intentID, eventID, status,
		attempts, key, params, a.Expiry).Scan(&id)
	return id, err
}

// ExpireApprovals marks expired the pending requests of channel whose time ran out.
func ExpireApprovals(ctx context.Context, db query.DB, channel string) error {
	_, err := db.Exec(ctx, approvalExpireSQL, channel)
	return err
}

// SelectApproval reads request id; pgx.ErrNoRows when there is none.
func SelectApproval(ctx context.Context, db query.DB, id int64) (effectdtype.ApprovalRequest, error) {
	return scanApproval(db.QueryRow(ctx, approvalGet, id))
}

// LockApproval reads and locks request id in the transaction tx.
func LockApproval(ctx context.Context, tx pgx.Tx, id int64) (effectdtype.ApprovalRequest, error) {
	return scanApproval(tx.QueryRow(ctx, approvalLock, id))
}

// PendingApprovals lists up to limit pending, unexpired requests of channels
// (nil: every channel) with an id above after, oldest first.
func PendingApprovals(ctx context.Context, db query.DB, channels []string, after int64, limit int) ([]effectdtype.ApprovalRequest, error) {
	rows, err := db.Query(ctx, approvalPending, channels, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (effectdtype.ApprovalRequest, error) { return scanApproval(r) })
}

// Decision is a decision on a pending request as DecideApproval records it.
type Decision struct {
	ID      int64
	State   effectdtype.ApprovalState
	Decider *string // nil only for expired
	Reason  string
	Outcome string
}

// DecideApproval records d as a compare-and-set on a pending request not
// requested by d.Decider; false when the request was not pending or was the
// decider's own.
func DecideApproval(ctx context.Context, db query.DB, d Decision) (bool, error) {
	var id int64
	err := db.QueryRow(ctx, approvalDecideSQL, d.ID, string(d.State), d.Decider, d.Reason, d.Outcome).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// scanApproval reads the columns of approval_columns.sql.
func scanApproval(row pgx.Row) (a effectdtype.ApprovalRequest, err error) {
	var intentID *int64
	var eventID, status, key *string
	var attempts *int
	var state string
	err = row.Scan(&a.ID, &a.Channel, &a.Action, &intentID, &eventID, &status, &attempts, &key, &a.Parameters,
		&a.Reason, &a.Requester, &a.CreatedAt, &a.ExpiresAt, &state, &a.Decider, &a.DecisionReason, &a.DecidedAt, &a.Outcome)
	a.State = effectdtype.ApprovalState(state)
	if intentID != nil {
		a.Intent = &effectdtype.ApprovalTarget{ID: *intentID, EventID: deref(eventID), Status: deref(status),
			IdempotencyKey: deref(key)}
		if attempts != nil {
			a.Intent.Attempts = *attempts
		}
	}
	return a, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

//go:embed approval_bulk_snapshot.sql
var approvalBulkSnapshotSQL string

//go:embed approval_bulk_extend.sql
var approvalBulkExtendSQL string

//go:embed approval_outcome.sql
var approvalOutcomeSQL string

// SnapshotForApproval is what two-person approval reads of a bulk snapshot.
type SnapshotForApproval struct {
	Action, As string
	Matched    int
	Channel    string   // the channel its filter names; "" = none
	Channels   []string // the channels it was frozen among; nil: every channel
	Applicable bool     // neither applied nor expired
}

// SelectSnapshotForApproval reads snapshot id; pgx.ErrNoRows when there is none.
func SelectSnapshotForApproval(ctx context.Context, db query.DB, id string) (s SnapshotForApproval, err error) {
	err = db.QueryRow(ctx, approvalBulkSnapshotSQL, id).Scan(&s.Action, &s.As, &s.Matched, &s.Channel, &s.Channels, &s.Applicable)
	return s, err
}

// ExtendSnapshot keeps snapshot id applicable until at least until.
func ExtendSnapshot(ctx context.Context, db query.DB, id string, until time.Time) error {
	_, err := db.Exec(ctx, approvalBulkExtendSQL, id, until)
	return err
}

// SetApprovalOutcome records the outcome of approved request id, and its
// state: approved, or failed when its action could not run.
func SetApprovalOutcome(ctx context.Context, db query.DB, id int64, state effectdtype.ApprovalState, outcome string) error {
	_, err := db.Exec(ctx, approvalOutcomeSQL, id, string(state), outcome)
	return err
}
