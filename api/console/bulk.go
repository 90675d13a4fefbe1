package console

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api/client"
)

// bulkAction is one choice of the bulk form.
type bulkAction struct{ Value, Label, Risk string }

var bulkActions = []bulkAction{
	{"retry", "Retry", "Sends each FAILED, SKIPPED or IN_DOUBT intent again. For IN_DOUBT ones, the first call may have taken effect."},
	{"cancel", "Cancel", "PENDING intents are never sent."},
	{"resolve:resend", "Resolve as resend", "IN_DOUBT intents are sent again: an SMS may arrive twice."},
	{"resolve:skip", "Resolve as skip", "IN_DOUBT intents are never sent: if the first call did not take effect, that is a gap."},
}

// bulkPreview freezes a snapshot of the filtered list and shows its count and sample.
func (c *console) bulkPreview(w http.ResponseWriter, r *http.Request) {
	action, as, _ := strings.Cut(r.PostFormValue("action"), ":")
	req := client.BulkRequest{Action: action, As: as, Reason: strings.TrimSpace(r.PostFormValue("reason")),
		Filter: client.BulkFilter{Status: r.PostFormValue("status"), Channel: r.PostFormValue("channel"),
			EventIDPrefix: strings.TrimSpace(r.PostFormValue("event_id_prefix"))}}
	snap, err := c.client(r).Bulk(r.Context(), req)
	if err != nil {
		c.flash(r, "error", "No snapshot taken: "+apiMessage(err))
		http.Redirect(w, r, "/ui/intents?"+queryOf(req.Filter), http.StatusSeeOther)
		return
	}
	label := r.PostFormValue("action")
	for _, a := range bulkActions {
		if a.Value == label {
			label = a.Label
		}
	}
	c.render(w, r, http.StatusOK, "bulk", "Bulk action", map[string]any{"Snap": snap, "Req": req, "Label": label})
}

func queryOf(f client.BulkFilter) string {
	return client.Filter{Status: f.Status, Channel: f.Channel}.Query().Encode()
}

func (c *console) bulkApply(w http.ResponseWriter, r *http.Request) {
	res, err := c.client(r).ApplyBulkWithReason(r.Context(), chi.URLParam(r, "snapshot"), strings.TrimSpace(r.PostFormValue("reason")))
	if c.requestedFlash(r, err) { // a two-person channel: a request instead
		http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
		return
	}
	if err != nil {
		c.flash(r, "error", "Nothing applied: "+apiMessage(err))
		http.Redirect(w, r, "/ui/intents", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "bulk_result", "Bulk action applied", map[string]any{"Res": res,
		"Back": "/ui/intents?" + client.Filter{Status: r.PostFormValue("status"), Channel: r.PostFormValue("channel")}.Query().Encode()})
}
