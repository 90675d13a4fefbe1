package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// approvalRequested is the answer of a direct action that a two-person
// channel turned into an approval request: 202 Accepted.
type approvalRequested struct {
	Request effectdtype.ApprovalRequest `json:"approval_request"`
	Message string                      `json:"message"`
}

// accepted is an endpoint's answer written with 202 Accepted instead of its
// usual one (handle): an action that became an approval request.
type accepted struct{ body approvalRequested }

func (a *accepted) Error() string { return a.body.Message }

// requested answers a new approval request: 202, counted.
func (h *handler) requested(r *http.Request, a effectdtype.ApprovalRequest) error {
	h.approvals.WithLabelValues(a.Channel, a.Action, string(a.State)).Inc()
	h.log.InfoContext(r.Context(), "approval requested", "request", a.ID, "channel", a.Channel, "action", a.Action,
		"requester", a.Requester)
	return &accepted{approvalRequested{Request: a, Message: fmt.Sprintf(
		"channel %q needs a second person for %s: approval request %d awaits another principal with the approve right (expires %s)",
		a.Channel, a.Action, a.ID, a.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))}}
}

// newApprovalMetrics returns effectd_approval_requests_total.
func newApprovalMetrics() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "effectd_approval_requests_total",
		Help: "Approval requests of two-person channels, by channel, action and the state they reached: pending (requested), approved, rejected, expired, failed (approved but moved on: nothing changed)."},
		[]string{"channel", "action", "state"})
}

// listApprovals answers GET /v1/approvals: the pending, unexpired requests of
// the channels the caller sees (?channel= one of them), oldest first.
func (h *handler) listApprovals(_ http.ResponseWriter, r *http.Request) (effectdtype.ApprovalPage, error) {
	p := principalOf(r)
	limit, after, err := queryPage(r)
	if err != nil {
		return effectdtype.ApprovalPage{}, err
	}
	var channels []string // nil: every channel
	if c := r.URL.Query().Get("channel"); c != "" {
		if !p.CanSee(c) {
			return effectdtype.ApprovalPage{Requests: []effectdtype.ApprovalRequest{}}, nil // as for a channel with none
		}
		channels = []string{c}
	} else if p.scoped() {
		sc, err := h.scopeOf(r.Context(), p)
		if err != nil {
			return effectdtype.ApprovalPage{}, err
		}
		channels = sc.visible
	}
	return h.svc.PendingApprovals(r.Context(), channels, after, int(limit))
}

// approval reads the request of the path's id that p may see: one of a
// channel out of p's scope answers as a missing one (404).
func (h *handler) approval(r *http.Request, p Principal) (effectdtype.ApprovalRequest, error) {
	id, err := pathID(r)
	if err != nil {
		return effectdtype.ApprovalRequest{}, err
	}
	a, err := h.svc.GetApproval(r.Context(), id)
	if err == nil && !p.CanSee(a.Channel) {
		err = hidden{What: fmt.Sprintf("approval request %d", id)}
	}
	return a, err
}

// getApproval answers GET /v1/approvals/{id}.
func (h *handler) getApproval(_ http.ResponseWriter, r *http.Request) (effectdtype.ApprovalRequest, error) {
	return h.approval(r, principalOf(r))
}

// approveRequest answers POST /v1/approvals/{id}/approve.
func (h *handler) approveRequest(w http.ResponseWriter, r *http.Request) (effectdtype.ApprovalRequest, error) {
	return h.decide(w, r, true)
}

// rejectRequest answers POST /v1/approvals/{id}/reject.
func (h *handler) rejectRequest(w http.ResponseWriter, r *http.Request) (effectdtype.ApprovalRequest, error) {
	return h.decide(w, r, false)
}

// decide approves or rejects the path's request with the body's reason, as
// the caller: 404 out of scope, 403 without the approve right on its channel
// or on one's own request, 410 expired, 409 decided already or moved on.
func (h *handler) decide(w http.ResponseWriter, r *http.Request, approve bool) (effectdtype.ApprovalRequest, error) {
	p := principalOf(r)
	if !p.Can(ActionApprove) { // the same answer whatever the id: nothing is told of the request
		return effectdtype.ApprovalRequest{}, fmt.Errorf("%w: role %s may not approve", errForbidden, p.Role)
	}
	a, err := h.approval(r, p)
	if err != nil {
		return a, err
	}
	if !p.CanApprove(a.Channel) {
		return a, fmt.Errorf("%w: %q holds no approve right on channel %q (access.tokens[].approve)", errForbidden, p.Name, a.Channel)
	}
	body, err := readBody(w, r)
	if err != nil {
		return a, err
	}
	reason, err := parseReason(body)
	if err != nil {
		return a, err
	}
	out, err := h.svc.Decide(r.Context(), operator.Decision{Request: a.ID, Decider: p.Name, Approve: approve,
		Reason: reason, Sees: p.sees()})
	var moved *operator.MovedOnError
	switch {
	case err == nil:
		h.approvals.WithLabelValues(out.Channel, out.Action, string(out.State)).Inc()
	case errors.As(err, &moved):
		h.approvals.WithLabelValues(a.Channel, a.Action, string(effectdtype.ApprovalFailed)).Inc()
	case errors.Is(err, operator.ErrExpired):
		h.approvals.WithLabelValues(a.Channel, a.Action, string(effectdtype.ApprovalExpired)).Inc()
	}
	if err != nil {
		return out, err
	}
	h.log.InfoContext(r.Context(), "approval decided", "request", out.ID, "channel", out.Channel, "action", out.Action,
		"state", out.State, "requester", out.Requester, "decider", p.Name)
	return out, nil
}

// policyReason reads ?reason= of PATCH …/policy: the reason of the approval
// request a two-person channel's policy change becomes.
func policyReason(r *http.Request) (string, error) {
	reason := strings.TrimSpace(r.URL.Query().Get("reason"))
	return reason, operator.CheckReason(reason, true)
}
