package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
)

// listEvents answers GET /v1/provider-events?orphan=&channel=&intent_id=&limit=&after=,
// keyset-paginated by id, within the channels the caller may see.
func (h *handler) listEvents(_ http.ResponseWriter, r *http.Request) (effectdtype.ProviderEventPage, error) {
	var page effectdtype.ProviderEventPage
	q := r.URL.Query()
	f := effectdtype.EventFilter{}
	if s := q.Get("orphan"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return page, fmt.Errorf("%w: orphan: must be true or false, got %q", dispatcher.ErrInvalid, truncate(s, 40))
		}
		f.OrphansOnly = b
	}
	if s := q.Get("channel"); s != "" {
		f.Channel = &s
	}
	if q.Get("intent_id") != "" {
		id, err := queryInt(r, "intent_id", 0, 1, 1<<62)
		if err != nil {
			return page, err
		}
		f.IntentID = &id
	}
	var err error
	if f.Limit, f.After, err = queryPage(r); err != nil {
		return page, err
	}
	sc, err := h.scopeOf(r.Context(), principalOf(r))
	if err != nil {
		return page, fmt.Errorf("list provider events: %w", err)
	}
	f.Channels = sc.visible
	if page, err = h.svc.ListProviderEvents(r.Context(), f); err != nil {
		return page, fmt.Errorf("list provider events: %w", err)
	}
	for i := range page.Events {
		if e := &page.Events[i]; len(sc.redact[e.Channel]) > 0 {
			// The provider's own names (To, Body) differ from the payload's:
			// every value is masked, the object and its keys kept.
			e.Payload = dispatcher.MaskValues(e.Payload)
		}
	}
	return page, nil
}
