package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
)

// Sweeper runs a reconciliation sweep: what a channel's provider holds for a
// window, joined with the table.
type Sweeper interface {
	Sweep(ctx context.Context, channel string, since, until time.Time) (effectdtype.SweepReport, error)
}

// sweepRequest is the body of POST /v1/sweeps.
type sweepRequest struct {
	Channel string `json:"channel"`
	Since   string `json:"since"`
	Until   string `json:"until"` // "": now
}

// createSweep answers POST /v1/sweeps with a sweep's report. It changes
// nothing; an operator or admin of the channel may run it.
func (h *handler) createSweep(w http.ResponseWriter, r *http.Request) (rep effectdtype.SweepReport, err error) {
	body, err := readBody(w, r)
	if err != nil {
		return rep, err
	}
	var req sweepRequest
	if err := decodeObject(body, &req); err != nil {
		return rep, err
	}
	if req.Channel == "" {
		return rep, fmt.Errorf("%w: channel: is required", dispatcher.ErrInvalid)
	}
	if err := h.authorizeChannel(r.Context(), principalOf(r), req.Channel, ActionOperate); err != nil {
		return rep, err
	}
	since, err := parseTime("since", req.Since, time.Time{})
	if err != nil {
		return rep, err
	}
	until, err := parseTime("until", req.Until, time.Now())
	if err != nil {
		return rep, err
	}
	if h.sweeper == nil {
		return rep, fmt.Errorf("%w: no dispatcher runs in this process", errUnavailable)
	}
	rep, err = h.sweeper.Sweep(r.Context(), req.Channel, since, until)
	if errors.Is(err, dispatcher.ErrListing) {
		err = fmt.Errorf("%w: %s", errUnavailable, message(err, nil))
	}
	return rep, err
}

// parseTime reads field s, an RFC 3339 time; def when s is empty.
func parseTime(field, s string, def time.Time) (time.Time, error) {
	if s == "" {
		if def.IsZero() {
			return def, fmt.Errorf("%w: %s: is required", dispatcher.ErrInvalid, field)
		}
		return def, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.Year() < 1 || t.Year() > 9999 {
		return t, fmt.Errorf("%w: %s: must be an RFC 3339 time such as 2026-11-30T12:00:00Z, got %q", dispatcher.ErrInvalid, field, truncate(s, 40))
	}
	return t, nil
}
