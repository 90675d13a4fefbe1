package api

import (
	"net/http"

	"github.com/effectd/effectd/effectdtype"
)

// stats answers GET /v1/stats: counts by channel and status, the wait of the
// oldest due PENDING intent, SENDING past lease and IN_DOUBT counts, of the
// channels the caller sees.
func (h *handler) stats(_ http.ResponseWriter, r *http.Request) (effectdtype.Stats, error) {
	return h.svc.Stats(r.Context(), principalOf(r).CanSee)
}
