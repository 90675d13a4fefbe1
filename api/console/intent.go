package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/statemachine"
)

// intentData is what the intent page shows.
type intentData struct {
	D          client.IntentDetail
	Channel    client.Channel
	Timeline   []timelineItem
	Dashboard  string
	CanOperate bool
	CanResolve bool
	CanRetry   bool
	CanCancel  bool
	DryRun     *client.ReconcileResult
	TraceLink  string // the trace UI's page of the intent's trace; "" without one
}

func (c *console) loadIntent(r *http.Request) (intentData, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return intentData{}, &client.Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such intent."}
	}
	api := c.client(r)
	d, err := api.Intent(r.Context(), id)
	if err != nil {
		return intentData{}, err
	}
	ch, err := api.Channel(r.Context(), d.Intent.Channel)
	if err != nil {
		return intentData{}, err
	}
	events, err := api.ProviderEvents(r.Context(), id)
	var e *client.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		events, err = nil, nil // an API without provider events
	}
	if err != nil {
		return intentData{}, err
	}
	p, _ := c.who(r)
	st := d.Intent.Status
	can := func(ev statemachine.Event) bool { _, err := statemachine.Next(st, ev); return err == nil }
	return intentData{D: d, Channel: ch, Timeline: timeline(d, events), Dashboard: dashboardLink(ch.Provider, deref(d.Intent.ProviderRef)),
		CanOperate: p.Can("operate"), CanResolve: can(statemachine.ResolveSkip), CanRetry: can(statemachine.Requeue),
		CanCancel: can(statemachine.Cancel), TraceLink: c.traceLink(d.TraceID)}, nil
}

func (c *console) intent(w http.ResponseWriter, r *http.Request) {
	d, err := c.loadIntent(r)
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "intent", "Intent "+d.D.Intent.EventID, d)
}

// intentAction runs a form of the intent page through the API, then shows
// the intent again with what happened. A reconcile dry run is shown at once.
func (c *console) intentAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		c.renderError(w, r, http.StatusNotFound, "No such intent.")
		return
	}
	api, ctx, action := c.client(r), r.Context(), chi.URLParam(r, "action")
	reason, force := strings.TrimSpace(r.PostFormValue("reason")), r.PostFormValue("force") == "on"
	if e := r.PostFormValue("event_id"); e != "" { // the event the page showed
		ctx = client.ShownEvent(ctx, e)
	}
	var in client.IntentRow
	switch action {
	case "resolve":
		in, err = api.Resolve(ctx, id, client.Resolution{As: r.PostFormValue("as"),
			ProviderRef: strings.TrimSpace(r.PostFormValue("provider_ref")), Reason: reason, Force: force})
	case "retry":
		in, err = api.Retry(ctx, id, reason, force)
	case "cancel":
		in, err = api.Cancel(ctx, id, reason)
	case "reconcile":
		dry := r.PostFormValue("dry_run") != "false"
		s, rerr := api.Reconcile(ctx, id, dry)
		if rerr == nil && dry {
			d, err := c.loadIntent(r)
			if err != nil {
				c.apiFailed(w, r, err)
				return
			}
			d.DryRun = &s
			c.render(w, r, http.StatusOK, "intent", "Intent "+d.D.Intent.EventID, d)
			return
		}
		err = rerr
		if err == nil {
			c.flash(r, "ok", fmt.Sprintf("Reconciled: the lookup said %s; the intent went %s → %s.", s.Outcome, s.From, s.To))
		}
	}
	switch {
	case c.requestedFlash(r, err): // a two-person channel: a request instead
	case err != nil:
		c.flash(r, "error", "Nothing changed: "+apiMessage(err))
	case action != "reconcile":
		c.flash(r, "ok", fmt.Sprintf("Done: the intent is now %s.", in.Status))
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/intents/%d", id), http.StatusSeeOther)
}

// traceLink is the trace UI's address of trace id, "" without a trace UI
// (Config.TraceURL) or an id.
func (c *console) traceLink(id string) string {
	if c.traceURL == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(c.traceURL, "{trace_id}", id)
}
