package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// channelView returns c as operators see it, with counts.
func channelView(c channeldb.ChannelRow, counts map[statemachine.State]int64) (effectdtype.Channel, error) {
	p, err := policy.Effective(c.Provider, c.Policy, c.Override)
	if err != nil {
		return effectdtype.Channel{}, fmt.Errorf("channel %q: stored policy: %w", c.Name, err)
	}
	if counts == nil {
		counts = zeroCounts()
	}
	return effectdtype.Channel{Name: c.Name, Provider: c.Provider, Paused: c.Paused, Policy: p, PolicyYAML: c.Policy,
		PolicyOverride: c.Override, Counts: counts, CountsKind: effectdtype.CountsExact, UpdatedAt: c.UpdatedAt}, nil
}

// zeroCounts has every state, so a channel always lists all of them.
func zeroCounts() map[statemachine.State]int64 {
	m := make(map[statemachine.State]int64, len(statemachine.States))
	for _, s := range statemachine.States {
		m[s] = 0
	}
	return m
}

// channelCounts returns intent counts by channel and status (exact, read
// without reading history in both modes: effectdtype.CountsExact); name ""
// means all channels.
func channelCounts(ctx context.Context, db query.DB, store storage.Operator, name string) (map[string]map[statemachine.State]int64, error) {
	var filter *string
	if name != "" {
		filter = &name
	}
	counts, err := store.ChannelCounts(ctx, db, filter)
	if err != nil {
		return nil, err
	}
	return countsByChannel(counts), nil
}

// countsByChannel returns counts by channel and status, every state of a
// channel with a count listed.
func countsByChannel(counts []readdb.StatusCount) map[string]map[statemachine.State]int64 {
	out := map[string]map[statemachine.State]int64{}
	for _, c := range counts {
		if out[c.Channel] == nil {
			out[c.Channel] = zeroCounts()
		}
		out[c.Channel][c.Status] = c.N
	}
	return out
}

// ListChannels returns, by name, every channel that sees admits (nil: every
// channel), with its counts.
func (svc *Service) ListChannels(ctx context.Context, sees func(name string) bool) ([]effectdtype.Channel, error) {
	chans, err := channeldb.ListChannels(ctx, svc.pool)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	counts, err := channelCounts(ctx, svc.pool, svc.store, "")
	if err != nil {
		return nil, fmt.Errorf("list channels: counts: %w", err)
	}
	out := make([]effectdtype.Channel, 0, len(chans))
	for _, c := range chans {
		if sees != nil && !sees(c.Name) {
			continue
		}
		v, err := channelView(c, counts[c.Name])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// GetChannel returns channel name with its counts; ErrNotFound when there is none.
func (svc *Service) GetChannel(ctx context.Context, name string) (effectdtype.Channel, error) {
	c, err := channeldb.SelectChannel(ctx, svc.pool, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return effectdtype.Channel{}, fmt.Errorf("channel %q: %w", truncate(name, 64), ErrNotFound)
	}
	if err != nil {
		return effectdtype.Channel{}, fmt.Errorf("get channel: %w", err)
	}
	counts, err := channelCounts(ctx, svc.pool, svc.store, name)
	if err != nil {
		return effectdtype.Channel{}, fmt.Errorf("get channel: counts: %w", err)
	}
	return channelView(c, counts[name])
}

// ChannelExists reports whether channel name is registered.
func (svc *Service) ChannelExists(ctx context.Context, name string) (bool, error) {
	return channeldb.ChannelExists(ctx, svc.pool, name)
}

// ChannelNames returns the name of every registered channel.
func (svc *Service) ChannelNames(ctx context.Context) ([]string, error) {
	return channeldb.ChannelNames(ctx, svc.pool)
}

// Redactions returns every channel's redacted payload fields, by channel name.
func (svc *Service) Redactions(ctx context.Context) ([]effectdtype.Redaction, error) {
	return channeldb.Redactions(ctx, svc.pool)
}

// PauseChannel stops every instance from claiming channel name's intents
// (within the refresher's period), audited as actor's; it returns the channel
// as it is afterwards.
func (svc *Service) PauseChannel(ctx context.Context, name, actor string) (effectdtype.Channel, error) {
	return svc.changeChannel(ctx, name, actor, "channel.pause", func(channeldb.ChannelRow) (channelUpdate, error) {
		return setPaused(name, true), nil
	})
}

// ResumeChannel restarts claiming channel name's intents, audited as actor's.
func (svc *Service) ResumeChannel(ctx context.Context, name, actor string) (effectdtype.Channel, error) {
	return svc.changeChannel(ctx, name, actor, "channel.resume", func(channeldb.ChannelRow) (channelUpdate, error) {
		return setPaused(name, false), nil
	})
}

// setPaused is the update that pauses or resumes channel name.
func setPaused(name string, paused bool) channelUpdate {
	return func(ctx context.Context, tx query.DB) error { return channeldb.SetPaused(ctx, tx, name, paused) }
}

// PolicyChange is an operator's change of a channel's run-time policy override.
type PolicyChange struct {
	Channel string
	Actor   string
	Patch   json.RawMessage // a JSON merge patch of the override; see MergePolicy
	// Check, when set, vets Patch once the channel is found and before it is
	// merged (the admin API's checks of a request body), so that a missing
	// channel is reported as missing whatever Patch holds.
	Check func(patch []byte) error
}

// ChangePolicy merges c.Patch into the channel's run-time override
// (MergePolicy) and stores it, audited; it returns the channel as it is
// afterwards. Every instance applies it within the refresher's period.
func (svc *Service) ChangePolicy(ctx context.Context, c PolicyChange) (effectdtype.Channel, error) {
	return svc.changeChannel(ctx, c.Channel, c.Actor, "channel.policy", func(row channeldb.ChannelRow) (channelUpdate, error) {
		if err := refuseTwoPerson(row); err != nil {
			return nil, err
		}
		return c.update(row)
	})
}

// update vets c.Patch (Check), merges it into row's override and returns
// the update that stores the result.
func (c PolicyChange) update(row channeldb.ChannelRow) (channelUpdate, error) {
	if c.Check != nil {
		if err := c.Check(c.Patch); err != nil {
			return nil, err
		}
	}
	override, err := MergePolicy(row.Provider, row.Policy, row.Override, c.Patch)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx query.DB) error {
		return channeldb.SetOverride(ctx, tx, c.Channel, override)
	}, nil
}

// refuseTwoPerson refuses, with ErrApprovalRequired, to change alone the
// policy of a channel whose policy says approval: two-person (a patch that
// turns it off included).
func refuseTwoPerson(row channeldb.ChannelRow) error {
	p, err := policy.Effective(row.Provider, row.Policy, row.Override)
	if err != nil || !p.TwoPerson() {
		return err
	}
	return fmt.Errorf("%w: channel %q's policy says approval: two-person: a change of it is a request another person approves", ErrApprovalRequired, row.Name)
}

// channelUpdate changes a locked channel's row in the transaction tx.
type channelUpdate func(ctx context.Context, tx query.DB) error

// changeChannel locks channel name, runs the update change decides on, and
// writes an audit entry of action with the channel before and after, in one
// transaction (changeChannelIn). Its errors name action.
func (svc *Service) changeChannel(ctx context.Context, name, actor, action string,
	change func(channeldb.ChannelRow) (channelUpdate, error)) (effectdtype.Channel, error) {
	v, err := func() (v effectdtype.Channel, err error) {
		tx, err := svc.pool.Begin(ctx)
		if err != nil {
			return v, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if v, err = changeChannelIn(ctx, tx, svc.store, accessdb.Audit{Actor: actor, Action: action, Channel: name}, change); err != nil {
			return v, err
		}
		return v, tx.Commit(ctx)
	}()
	if err != nil {
		return v, fmt.Errorf("%s: %w", action, err)
	}
	return v, nil
}

// changeChannelIn is changeChannel's work in the transaction tx, on channel
// e.Channel, audited as e with the channel before and after; it returns the
// channel as it is afterwards, uncommitted.
func changeChannelIn(ctx context.Context, tx pgx.Tx, store storage.Operator, e accessdb.Audit, change func(channeldb.ChannelRow) (channelUpdate, error)) (v effectdtype.Channel, err error) {
	name := e.Channel
	before, err := channeldb.LockChannel(ctx, tx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("channel %q: %w", truncate(name, 64), ErrNotFound)
	}
	if err != nil {
		return v, err
	}
	update, err := change(before)
	if err != nil {
		return v, err
	}
	if err := update(ctx, tx); err != nil {
		return v, err
	}
	after, err := channeldb.SelectChannel(ctx, tx, name)
	if err != nil {
		return v, err
	}
	if err := auditChannel(ctx, tx, e, before, after); err != nil {
		return v, err
	}
	counts, err := channelCounts(ctx, tx, store, name)
	if err != nil {
		return v, err
	}
	return channelView(after, counts[name])
}

// auditChannel writes e with the channel before and after the change.
func auditChannel(ctx context.Context, tx pgx.Tx, e accessdb.Audit, before, after channeldb.ChannelRow) (err error) {
	if e.Before, err = channelAudit(before); err != nil {
		return err
	}
	if e.After, err = channelAudit(after); err != nil {
		return err
	}
	return accessdb.WriteAudit(ctx, tx, e)
}

// channelAudit is what an audit entry records of c: its effective policy,
// its override and whether it is paused.
func channelAudit(c channeldb.ChannelRow) (accessdb.AuditState, error) {
	p, err := policy.Effective(c.Provider, c.Policy, c.Override)
	if err != nil {
		return accessdb.AuditState{}, err
	}
	effective, err := json.Marshal(p)
	if err != nil {
		return accessdb.AuditState{}, err
	}
	return accessdb.AuditState{ChannelState: &accessdb.ChannelState{Paused: c.Paused, Policy: effective, PolicyOverride: c.Override}}, nil
}

// MergePolicy returns a channel's new run-time override after patch, a JSON
// merge patch of override, merged by policy.Patch over the provider's
// defaults and the registered (YAML) policy. A patch that makes the policy
// invalid is ErrInvalid, its text the policy's own; a top-level key that no
// policy has wraps policy.ErrUnknownField. patch must be a JSON object.
func MergePolicy(provider string, registered, override, patch []byte) (map[string]json.RawMessage, error) {
	out, err := policy.Patch(provider, registered, override, patch)
	var bad *policy.Error
	if errors.As(err, &bad) {
		return nil, invalidPolicy{bad}
	}
	return out, err
}

// invalidPolicy is a refused policy change: ErrInvalid, reading as the policy's message.
type invalidPolicy struct{ err *policy.Error }

func (e invalidPolicy) Error() string        { return e.err.Error() }
func (e invalidPolicy) Unwrap() error        { return e.err }
func (e invalidPolicy) Is(target error) bool { return target == ErrInvalid }

// PreviewPolicy returns ch's policy fields as they are (now) and as they
// would be after patch (after), in the same order, merged by MergePolicy as
// ChangePolicy would merge it; it changes nothing.
func PreviewPolicy(ch effectdtype.Channel, patch []byte) (now, after []policy.Field, err error) {
	override, err := MergePolicy(ch.Provider, ch.PolicyYAML, ch.PolicyOverride, patch)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(override)
	if err != nil {
		return nil, nil, err
	}
	if now, err = policy.Explain(ch.Provider, ch.PolicyYAML, ch.PolicyOverride); err != nil {
		return nil, nil, err
	}
	if after, err = policy.Explain(ch.Provider, ch.PolicyYAML, b); err != nil {
		return nil, nil, err
	}
	return now, after, nil
}

// truncate returns s cut to n bytes, marked with an ellipsis, for an error message.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
