package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/policy"
)

// errPolicyMoved refuses an approved policy change whose channel's override
// changed since the request.
var errPolicyMoved = errors.New("the channel's policy changed since the request")

// policyParams are the parameters of a policy change's approval request:
// the patch, and the override it was made against.
type policyParams struct {
	Patch          json.RawMessage `json:"patch"`
	OverrideBefore json.RawMessage `json:"override_before"`
}

// RequestPolicyChange records c, a change of a two-person channel's policy
// (ErrApprovalRequired from ChangePolicy), as a pending approval request by
// c.Actor with reason. The patch is vetted now as ChangePolicy vets it; the
// approval applies it only while the channel's override is still the one it
// was made against.
func (svc *Service) RequestPolicyChange(ctx context.Context, c PolicyChange, reason string) (a effectdtype.ApprovalRequest, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "RequestPolicyChange(%q)", truncate(c.Channel, 64))
		}
	}()
	if err := CheckReason(reason, true); err != nil {
		return a, err
	}
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	row, err := channeldb.LockChannel(ctx, tx, c.Channel)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("channel %q: %w", truncate(c.Channel, 64), ErrNotFound)
	}
	if err != nil {
		return a, err
	}
	p, err := policy.Effective(row.Provider, row.Policy, row.Override)
	if err != nil {
		return a, err
	}
	if !p.TwoPerson() {
		return a, fmt.Errorf("%w: channel %q changes its policy without approval: patch it", ErrInvalid, row.Name)
	}
	if _, err := c.update(row); err != nil {
		return a, err
	}
	params, err := json.Marshal(policyParams{Patch: c.Patch, OverrideBefore: jsonOrNull(row.Override)})
	if err != nil {
		return a, err
	}
	return insertApproval(ctx, tx, accessdb.NewApproval{Channel: row.Name, Action: actionPolicy, Requester: c.Actor,
		Reason: reason, Parameters: params, Expiry: time.Duration(p.ApprovalExpiry)})
}

// approvePolicy applies approved policy change a in tx through
// ChangePolicy's path (changeChannelIn), audited with both people.
func approvePolicy(ctx context.Context, tx pgx.Tx, store storage.Operator, a effectdtype.ApprovalRequest, approval *accessdb.AuditApproval) (string, error) {
	var params policyParams
	if err := json.Unmarshal(a.Parameters, &params); err != nil {
		return "", fmt.Errorf("approval request %d: parameters: %w", a.ID, err)
	}
	change := PolicyChange{Channel: a.Channel, Actor: approval.ApprovedBy, Patch: params.Patch}
	_, err := changeChannelIn(ctx, tx, store, accessdb.Audit{Actor: approval.ApprovedBy, Action: actionPolicy, Channel: a.Channel,
		Reason: a.Reason, Approval: approval}, func(row channeldb.ChannelRow) (channelUpdate, error) {
		if !sameJSON(row.Override, params.OverrideBefore) {
			return nil, fmt.Errorf("%w: its override was %s, now %s", errPolicyMoved, jsonOrNull(params.OverrideBefore), jsonOrNull(row.Override))
		}
		return change.update(row)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("policy of channel %q patched with %s", a.Channel, params.Patch), nil
}

// jsonOrNull is b, or null when b is empty.
func jsonOrNull(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// sameJSON reports whether two overrides hold the same JSON value; empty,
// null and {} are all no override.
func sameJSON(x, y []byte) bool {
	decode := func(b []byte) any {
		var v any
		if json.Unmarshal(b, &v) != nil || v == nil {
			return map[string]any{}
		}
		return v
	}
	return reflect.DeepEqual(decode(x), decode(y))
}

// bulkParams are the parameters of a bulk action's approval request.
type bulkParams struct {
	Snapshot string `json:"snapshot"`
	Rows     int    `json:"rows"`
}

// BulkApproval says whether applying snapshot id needs a second person:
// on a two-person channel, a snapshot of more rows than the channel's
// approval_bulk_threshold, or one whose action alone needs approval (a
// resolve as skip). It returns nil when the snapshot can be applied alone;
// ErrInvalid when it spans channels among which one is two-person (freeze
// one channel's, filter.channel, so that a request names one channel). A
// snapshot out of sees' sight is left to ApplyBulk to refuse.
func (svc *Service) BulkApproval(ctx context.Context, id string, sees func(channel string) bool) (*BulkApprovalNeed, error) {
	s, err := accessdb.SelectSnapshotForApproval(ctx, svc.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil || !s.Applicable || !(frozenFilter{BulkFilter: effectdtype.BulkFilter{Channel: s.Channel}, Channels: s.Channels}).within("", sees, "-") {
		return nil, err // ApplyBulk says why it cannot be applied, or that it is out of sight
	}
	if s.Channel == "" {
		return nil, svc.refuseMixedBulk(ctx, s)
	}
	p, err := channelPolicy(ctx, svc.pool, s.Channel)
	if err != nil || !p.TwoPerson() {
		return nil, err
	}
	if s.Matched <= p.ApprovalBulkThreshold && s.As != "skip" {
		return nil, nil
	}
	return &BulkApprovalNeed{Snapshot: id, Channel: s.Channel, Rows: s.Matched, Expiry: time.Duration(p.ApprovalExpiry)}, nil
}

// BulkApprovalNeed is a bulk action that needs a second person.
type BulkApprovalNeed struct {
	Snapshot string
	Channel  string
	Rows     int
	Expiry   time.Duration
}

// refuseMixedBulk refuses a snapshot frozen without a channel filter among
// channels one of which is two-person.
func (svc *Service) refuseMixedBulk(ctx context.Context, s accessdb.SnapshotForApproval) error {
	channels := s.Channels
	if channels == nil {
		names, err := svc.ChannelNames(ctx)
		if err != nil {
			return err
		}
		channels = names
	}
	for _, c := range channels {
		p, err := channelPolicy(ctx, svc.pool, c)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if p.TwoPerson() {
			return fmt.Errorf("%w: filter.channel: this snapshot may hold intents of channel %q, whose bulk actions need a second person's approval: freeze one snapshot per channel (filter.channel)", ErrInvalid, c)
		}
	}
	return nil
}

// RequestBulk records applying the snapshot of need as a pending approval
// request by requester with reason, and keeps the snapshot applicable until
// the request expires. The approval applies it as ApplyBulk does: each row
// only if still in the state it was frozen in.
func (svc *Service) RequestBulk(ctx context.Context, need BulkApprovalNeed, requester, reason string) (a effectdtype.ApprovalRequest, err error) {
	if err := CheckReason(reason, true); err != nil {
		return a, err
	}
	params, err := json.Marshal(bulkParams{Snapshot: need.Snapshot, Rows: need.Rows})
	if err != nil {
		return a, err
	}
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := accessdb.ExtendSnapshot(ctx, tx, need.Snapshot, time.Now().Add(need.Expiry+time.Minute)); err != nil {
		return a, err
	}
	return insertApproval(ctx, tx, accessdb.NewApproval{Channel: need.Channel, Action: actionBulk, Requester: requester,
		Reason: reason, Parameters: params, Expiry: need.Expiry})
}

// approveBulk records approved bulk request a, audited with both people, in
// tx and commits, then applies its snapshot as d's decider (ApplyBulk: each
// row in its own fenced transaction) and records what it did as the
// request's outcome: failed when the snapshot could not be applied.
func (svc *Service) approveBulk(ctx context.Context, tx pgx.Tx, a effectdtype.ApprovalRequest, d Decision) (effectdtype.ApprovalRequest, error) {
	var params bulkParams
	if err := json.Unmarshal(a.Parameters, &params); err != nil {
		return a, fmt.Errorf("approval request %d: parameters: %w", a.ID, err)
	}
	if err := accessdb.WriteAudit(ctx, tx, accessdb.Audit{Actor: d.Decider, Action: actionBulk, Channel: a.Channel, Reason: a.Reason,
		Snapshot: params.Snapshot, Approval: &accessdb.AuditApproval{Request: a.ID, RequestedBy: a.Requester, ApprovedBy: d.Decider}}); err != nil {
		return a, err
	}
	if _, err := record(ctx, tx, accessdb.Decision{ID: a.ID, State: effectdtype.ApprovalApproved, Decider: &d.Decider,
		Reason: d.Reason, Outcome: "applying snapshot " + params.Snapshot}); err != nil {
		return a, err
	}
	res, applyErr := svc.ApplyBulk(ctx, BulkApply{Snapshot: params.Snapshot, Actor: d.Decider, Sees: d.Sees})
	state, outcome := effectdtype.ApprovalApproved, fmt.Sprintf("snapshot %s: %d applied, %d skipped (moved on since it was frozen)", params.Snapshot, res.Applied, res.Skipped)
	if applyErr != nil && res.Event == "" {
		state, outcome = effectdtype.ApprovalFailed, message(applyErr)
	}
	if err := accessdb.SetApprovalOutcome(context.WithoutCancel(ctx), svc.pool, a.ID, state, outcome); err != nil {
		return a, err
	}
	a, err := svc.GetApproval(ctx, a.ID)
	if err == nil && state == effectdtype.ApprovalFailed {
		err = &MovedOnError{Request: a.ID, Why: outcome}
	}
	return a, err
}
