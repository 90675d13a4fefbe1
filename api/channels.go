package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// channelRow is one row of effectd.channels.
type channelRow struct {
	Name      string
	Provider  string
	Policy    []byte
	Override  []byte
	Paused    bool
	UpdatedAt time.Time
}

func scanChannel(row pgx.Row) (channelRow, error) {
	var c channelRow
	err := row.Scan(&c.Name, &c.Provider, &c.Policy, &c.Override, &c.Paused, &c.UpdatedAt)
	return c, err
}

// channel is how the API shows a channel.
type channel struct {
	Name           string                       `json:"name"`
	Provider       string                       `json:"provider"`
	Paused         bool                         `json:"paused"`
	Policy         policy.Policy                `json:"policy"`          // effective: defaults ← YAML ← override
	PolicyYAML     json.RawMessage              `json:"policy_yaml"`     // what the YAML set
	PolicyOverride json.RawMessage              `json:"policy_override"` // what the API changed
	Counts         map[statemachine.State]int64 `json:"counts"`          // intents by status
	CountsKind     string                       `json:"counts_kind"`     // countsExact
	UpdatedAt      time.Time                    `json:"updated_at"`
}

// countsExact is what every count the API answers is (counts_kind): exact,
// and read without reading history: live states from their partial indexes,
// settled states from the counts kept as changes happen.
const countsExact = "exact"

// view returns c as the API shows it, with counts.
func (c channelRow) view(counts map[statemachine.State]int64) (channel, error) {
	p, err := policy.Effective(c.Provider, c.Policy, c.Override)
	if err != nil {
		return channel{}, fmt.Errorf("channel %q: stored policy: %w", c.Name, err)
	}
	if counts == nil {
		counts = zeroCounts()
	}
	return channel{Name: c.Name, Provider: c.Provider, Paused: c.Paused, Policy: p,
		PolicyYAML: c.Policy, PolicyOverride: c.Override, Counts: counts, CountsKind: countsExact, UpdatedAt: c.UpdatedAt}, nil
}

// zeroCounts has every state, so a response always lists all of them.
func zeroCounts() map[statemachine.State]int64 {
	m := make(map[statemachine.State]int64, len(statemachine.States))
	for _, s := range statemachine.States {
		m[s] = 0
	}
	return m
}

// countByChannel returns live intent counts by channel and status; name "" means all channels.
func countByChannel(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, name string) (map[string]map[statemachine.State]int64, error) {
	var filter *string
	if name != "" {
		filter = &name
	}
	rows, err := q.Query(ctx, query.ChannelCounts, filter)
	if err != nil {
		return nil, err
	}
	out := map[string]map[statemachine.State]int64{}
	var ch string
	var st statemachine.State
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&ch, &st, &n}, func() error {
		if out[ch] == nil {
			out[ch] = zeroCounts()
		}
		out[ch][st] = n
		return nil
	})
	return out, err
}

// listChannels answers GET /v1/channels.
func (h *handler) listChannels(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, _ := h.pool.Query(ctx, query.ChannelList)
	chans, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (channelRow, error) { return scanChannel(row) })
	if err != nil {
		h.fail(w, r, fmt.Errorf("list channels: %w", err))
		return
	}
	counts, err := countByChannel(ctx, h.pool, "")
	if err != nil {
		h.fail(w, r, fmt.Errorf("list channels: counts: %w", err))
		return
	}
	p := principalOf(r)
	out := struct {
		Channels []channel `json:"channels"`
	}{Channels: make([]channel, 0, len(chans))}
	for _, c := range chans {
		if !p.CanSee(c.Name) {
			continue
		}
		v, err := c.view(counts[c.Name])
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out.Channels = append(out.Channels, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// getChannel answers GET /v1/channels/{name}.
func (h *handler) getChannel(w http.ResponseWriter, r *http.Request) {
	ctx, name := r.Context(), chi.URLParam(r, "name")
	if err := h.authorizeChannel(ctx, principalOf(r), name, ActionRead); err != nil {
		h.fail(w, r, err)
		return
	}
	c, err := scanChannel(h.pool.QueryRow(ctx, query.ChannelGet, name))
	if errors.Is(err, pgx.ErrNoRows) {
		h.fail(w, r, fmt.Errorf("channel %q: %w", truncate(name, 64), dispatcher.ErrNotFound))
		return
	}
	if err != nil {
		h.fail(w, r, fmt.Errorf("get channel: %w", err))
		return
	}
	counts, err := countByChannel(ctx, h.pool, name)
	if err != nil {
		h.fail(w, r, fmt.Errorf("get channel: counts: %w", err))
		return
	}
	v, err := c.view(counts[name])
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// patchPolicy answers PATCH /v1/channels/{name}/policy: validates the partial
// policy and stores it as the channel's run-time override, audited.
func (h *handler) patchPolicy(w http.ResponseWriter, r *http.Request) {
	if err := h.authorizeChannel(r.Context(), principalOf(r), chi.URLParam(r, "name"), ActionPolicy); err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.changeChannel(w, r, "channel.policy", func(c channelRow) (string, any, error) {
		override, err := applyPolicyPatch(c.Provider, c.Policy, c.Override, body)
		if err != nil {
			return "", nil, err
		}
		return query.ChannelSetOverride, override, nil
	})
}

// pauseChannel answers POST /v1/channels/{name}/pause: no instance claims its intents until resumed.
func (h *handler) pauseChannel(w http.ResponseWriter, r *http.Request) {
	if err := h.authorizeChannel(r.Context(), principalOf(r), chi.URLParam(r, "name"), ActionOperate); err != nil {
		h.fail(w, r, err)
		return
	}
	h.changeChannel(w, r, "channel.pause", func(channelRow) (string, any, error) { return query.ChannelSetPaused, true, nil })
}

// resumeChannel answers POST /v1/channels/{name}/resume.
func (h *handler) resumeChannel(w http.ResponseWriter, r *http.Request) {
	if err := h.authorizeChannel(r.Context(), principalOf(r), chi.URLParam(r, "name"), ActionOperate); err != nil {
		h.fail(w, r, err)
		return
	}
	h.changeChannel(w, r, "channel.resume", func(channelRow) (string, any, error) { return query.ChannelSetPaused, false, nil })
}

// changeChannel locks the channel, runs update(sql, arg) as change decides,
// and writes an audit entry with the channel before and after, in one transaction.
func (h *handler) changeChannel(w http.ResponseWriter, r *http.Request, action string, change func(channelRow) (sql string, arg any, err error)) {
	ctx, name, actor := r.Context(), chi.URLParam(r, "name"), principalOf(r).Name
	v, err := func() (v channel, err error) {
		tx, err := h.pool.Begin(ctx)
		if err != nil {
			return v, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		before, err := scanChannel(tx.QueryRow(ctx, query.ChannelLock, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return v, fmt.Errorf("channel %q: %w", truncate(name, 64), dispatcher.ErrNotFound)
		}
		if err != nil {
			return v, err
		}
		sql, arg, err := change(before)
		if err != nil {
			return v, err
		}
		if _, err := tx.Exec(ctx, sql, name, arg); err != nil {
			return v, err
		}
		after, err := scanChannel(tx.QueryRow(ctx, query.ChannelGet, name))
		if err != nil {
			return v, err
		}
		b, err := channelAudit(before)
		if err != nil {
			return v, err
		}
		a, err := channelAudit(after)
		if err != nil {
			return v, err
		}
		if err := query.WriteAudit(ctx, tx, query.Audit{Actor: actor, Action: action, Channel: name, Before: b, After: a}); err != nil {
			return v, err
		}
		counts, err := countByChannel(ctx, tx, name)
		if err != nil {
			return v, err
		}
		if v, err = after.view(counts[name]); err != nil {
			return v, err
		}
		return v, tx.Commit(ctx)
	}()
	if err != nil {
		h.fail(w, r, fmt.Errorf("%s: %w", action, err))
		return
	}
	h.log.InfoContext(ctx, "channel changed", "channel", name, "action", action, "actor", actor)
	writeJSON(w, http.StatusOK, v)
}

// channelAudit is what an audit entry records of c: its effective policy,
// its override and whether it is paused.
func channelAudit(c channelRow) (query.AuditState, error) {
	p, err := policy.Effective(c.Provider, c.Policy, c.Override)
	if err != nil {
		return query.AuditState{}, err
	}
	effective, err := json.Marshal(p)
	if err != nil {
		return query.AuditState{}, err
	}
	return query.AuditState{ChannelState: &query.ChannelState{Paused: c.Paused, Policy: effective, PolicyOverride: c.Override}}, nil
}
