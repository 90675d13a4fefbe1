package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// channelList is the answer of GET /v1/channels.
type channelList struct {
	Channels []effectdtype.Channel `json:"channels"`
}

// listChannels answers GET /v1/channels: the channels the caller sees.
func (h *handler) listChannels(_ http.ResponseWriter, r *http.Request) (channelList, error) {
	chans, err := h.svc.ListChannels(r.Context(), principalOf(r).CanSee)
	return channelList{Channels: chans}, err
}

// getChannel answers GET /v1/channels/{name}.
func (h *handler) getChannel(_ http.ResponseWriter, r *http.Request) (effectdtype.Channel, error) {
	ctx, name := r.Context(), chi.URLParam(r, "name")
	if err := h.authorizeChannel(ctx, principalOf(r), name, ActionRead); err != nil {
		return effectdtype.Channel{}, err
	}
	return h.svc.GetChannel(ctx, name)
}

// patchPolicy answers PATCH /v1/channels/{name}/policy: validates the partial
// policy and stores it as the channel's run-time override, audited.
func (h *handler) patchPolicy(w http.ResponseWriter, r *http.Request) (effectdtype.Channel, error) {
	name, p := chi.URLParam(r, "name"), principalOf(r)
	if err := h.authorizeChannel(r.Context(), p, name, ActionPolicy); err != nil {
		return effectdtype.Channel{}, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return effectdtype.Channel{}, err
	}
	change := operator.PolicyChange{Channel: name, Actor: p.Name, Patch: body, Check: checkPolicyPatch}
	ch, err := h.svc.ChangePolicy(r.Context(), change)
	if errors.Is(err, operator.ErrApprovalRequired) { // a two-person channel: a request instead
		reason, err := policyReason(r)
		if err != nil {
			return ch, err
		}
		a, err := h.svc.RequestPolicyChange(r.Context(), change, reason)
		if err != nil {
			return ch, err
		}
		return ch, h.requested(r, a)
	}
	h.logChange(r, name, "channel.policy", err)
	return ch, err
}

// checkPolicyPatch refuses a policy patch that is not one JSON object of
// strings effectd can store.
func checkPolicyPatch(patch []byte) error {
	var fields map[string]json.RawMessage
	return decodeObject(patch, &fields)
}

// pauseChannel answers POST /v1/channels/{name}/pause: no instance claims its intents until resumed.
func (h *handler) pauseChannel(_ http.ResponseWriter, r *http.Request) (effectdtype.Channel, error) {
	name, p := chi.URLParam(r, "name"), principalOf(r)
	if err := h.authorizeChannel(r.Context(), p, name, ActionOperate); err != nil {
		return effectdtype.Channel{}, err
	}
	ch, err := h.svc.PauseChannel(r.Context(), name, p.Name)
	h.logChange(r, name, "channel.pause", err)
	return ch, err
}

// resumeChannel answers POST /v1/channels/{name}/resume.
func (h *handler) resumeChannel(_ http.ResponseWriter, r *http.Request) (effectdtype.Channel, error) {
	name, p := chi.URLParam(r, "name"), principalOf(r)
	if err := h.authorizeChannel(r.Context(), p, name, ActionOperate); err != nil {
		return effectdtype.Channel{}, err
	}
	ch, err := h.svc.ResumeChannel(r.Context(), name, p.Name)
	h.logChange(r, name, "channel.resume", err)
	return ch, err
}

// logChange logs a channel change that succeeded.
func (h *handler) logChange(r *http.Request, name, action string, err error) {
	if err == nil {
		h.log.InfoContext(r.Context(), "channel changed", "channel", name, "action", action, "actor", principalOf(r).Name)
	}
}
