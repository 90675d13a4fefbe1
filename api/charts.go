package api

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
)

// charts answers GET /v1/charts: the console's charts of one channel
// (?channel=) or of the whole system, over ?range= 1h (the default), 24h or
// 7d, read from the minute rollups and the audit entries of the range. The
// whole system is every channel the caller sees: a caller limited to some
// channels gets the sum of theirs. A channel out of the caller's scope is not
// found.
func (h *handler) charts(_ http.ResponseWriter, r *http.Request) (effectdtype.Chart, error) {
	ctx, p, q := r.Context(), principalOf(r), r.URL.Query()
	var channels []string
	name := q.Get("channel")
	switch {
	case name != "":
		if err := h.authorizeChannel(ctx, p, name, ActionRead); err != nil {
			return effectdtype.Chart{}, err
		}
		exists, err := h.svc.ChannelExists(ctx, name)
		if err != nil {
			return effectdtype.Chart{}, err
		}
		if !exists {
			return effectdtype.Chart{}, fmt.Errorf("channel %q: %w", truncate(name, 64), dispatcher.ErrNotFound)
		}
		channels = []string{name}
	case p.scoped():
		names, err := h.svc.ChannelNames(ctx)
		if err != nil {
			return effectdtype.Chart{}, err
		}
		channels = []string{}
		for _, n := range names {
			if p.CanSee(n) {
				channels = append(channels, n)
			}
		}
	}
	chart, err := h.svc.Charts(ctx, channels, cmp.Or(q.Get("range"), "1h"), time.Now())
	chart.Channel = name
	return chart, err
}
