package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api/client"
)

// approvalRow is one pending request of the queue, with what the person
// looking may do with it.
type approvalRow struct {
	client.ApprovalRequest
	Own        bool // the person looking made it: they may not decide it
	CanApprove bool // they hold the approve right on its channel
}

// approvals shows the queue: the pending requests of the channels the
// person sees, oldest first, each with approve and reject forms for those
// who may decide it.
func (c *console) approvals(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	page, err := c.client(r).Approvals(r.Context(), r.URL.Query().Get("channel"), after, 100)
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	p, _ := c.who(r)
	rows := make([]approvalRow, len(page.Requests))
	for i, a := range page.Requests {
		rows[i] = approvalRow{ApprovalRequest: a, Own: a.Requester == p.Name, CanApprove: p.CanApprove(a.Channel)}
	}
	c.render(w, r, http.StatusOK, "approvals", "Approvals", map[string]any{"Rows": rows, "Next": page.Next})
}

// approvalAction approves or rejects a request through the API, then shows
// the queue again with what happened.
func (c *console) approvalAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		c.renderError(w, r, http.StatusNotFound, "No such approval request.")
		return
	}
	api, reason := c.client(r), strings.TrimSpace(r.PostFormValue("reason"))
	var a client.ApprovalRequest
	if chi.URLParam(r, "action") == "approve" {
		a, err = api.Approve(r.Context(), id, reason)
	} else {
		a, err = api.Reject(r.Context(), id, reason)
	}
	if err != nil {
		c.flash(r, "error", fmt.Sprintf("Request %d not decided: %s", id, apiMessage(err)))
	} else {
		c.flash(r, "ok", fmt.Sprintf("Request %d %s: %s", a.ID, a.State, deref(a.Outcome)))
	}
	http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
}

// requestedFlash says, after a form whose action a two-person channel turned
// into an approval request, that nothing changed yet and who decides it;
// false when err is no such answer.
func (c *console) requestedFlash(r *http.Request, err error) bool {
	var req *client.Requested
	if !errors.As(err, &req) {
		return false
	}
	c.flash(r, "ok", fmt.Sprintf("Nothing changed yet: approval request %d awaits a second person with the approve right on channel %s (Approvals page; expires %s).",
		req.Request.ID, req.Request.Channel, req.Request.ExpiresAt.UTC().Format("2006-01-02 15:04Z")))
	return true
}
