package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// channelGauges is one row of query.ChannelGauges.
type channelGauges struct {
	Channel          string  `json:"-"`
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"`
	SendingPastLease int64   `json:"sending_past_lease"`
	InDoubt          int64   `json:"in_doubt"`
	Deliveries       struct {
		Accepted    int64 `json:"accepted"`
		Delivered   int64 `json:"delivered"`
		Undelivered int64 `json:"undelivered"`
	} `json:"deliveries"` // SENT intents by what became of them, where known
}

// readGauges runs query.ChannelGauges.
func (h *handler) readGauges(ctx context.Context) ([]channelGauges, error) {
	rows, err := h.pool.Query(ctx, query.ChannelGauges)
	if err != nil {
		return nil, err
	}
	var out []channelGauges
	var g channelGauges
	_, err = pgx.ForEachRow(rows, []any{&g.Channel, &g.OldestPendingAge, &g.SendingPastLease, &g.InDoubt,
		&g.Deliveries.Accepted, &g.Deliveries.Delivered, &g.Deliveries.Undelivered}, func() error {
		out = append(out, g)
		return nil
	})
	return out, err
}

// channelStats is one channel in GET /v1/stats.
type channelStats struct {
	Counts     map[statemachine.State]int64 `json:"counts"`
	CountsKind string                       `json:"counts_kind"` // countsExact
	channelGauges
}

// statsResponse is the response of GET /v1/stats.
type statsResponse struct {
	Channels map[string]channelStats `json:"channels"`
	Totals   channelStats            `json:"totals"` // oldest age is the maximum over channels
}

// stats answers GET /v1/stats: counts by channel and status, the wait of the
// oldest due PENDING intent, SENDING past lease and IN_DOUBT counts.
func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	counts, err := countByChannel(ctx, h.pool, "")
	if err != nil {
		h.fail(w, r, fmt.Errorf("stats: counts: %w", err))
		return
	}
	gauges, err := h.readGauges(ctx)
	if err != nil {
		h.fail(w, r, fmt.Errorf("stats: gauges: %w", err))
		return
	}
	p := principalOf(r)
	out := statsResponse{Channels: map[string]channelStats{}, Totals: channelStats{Counts: zeroCounts(), CountsKind: countsExact}}
	for _, g := range gauges {
		if !p.CanSee(g.Channel) {
			continue
		}
		cs := channelStats{Counts: counts[g.Channel], CountsKind: countsExact, channelGauges: g}
		if cs.Counts == nil {
			cs.Counts = zeroCounts()
		}
		out.Channels[g.Channel] = cs
		for s, n := range cs.Counts {
			out.Totals.Counts[s] += n
		}
		out.Totals.OldestPendingAge = max(out.Totals.OldestPendingAge, g.OldestPendingAge)
		out.Totals.SendingPastLease += g.SendingPastLease
		out.Totals.InDoubt += g.InDoubt
		out.Totals.Deliveries.Accepted += g.Deliveries.Accepted
		out.Totals.Deliveries.Delivered += g.Deliveries.Delivered
		out.Totals.Deliveries.Undelivered += g.Deliveries.Undelivered
	}
	writeJSON(w, http.StatusOK, out)
}
