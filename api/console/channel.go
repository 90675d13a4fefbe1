package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// policyField is one row of the channel page's policy table.
type policyField struct {
	Name, Value string        // the field (backoff.base) and its value as a person reads it
	Source      policy.Source // default | YAML | override
	New         string        // in a preview: the value after the change, when it differs
}

// policyRows returns the rows of a policy table of fields.
func policyRows(fields []policy.Field) []policyField {
	out := make([]policyField, len(fields))
	for i, f := range fields {
		out[i] = policyField{Name: f.Name, Value: policyValue(f.Name, f.Value), Source: f.Source}
	}
	return out
}

func (c *console) channel(w http.ResponseWriter, r *http.Request) {
	c.showChannel(w, r, "", nil)
}

// showChannel renders the channel page; with patch, a preview of the policy change.
func (c *console) showChannel(w http.ResponseWriter, r *http.Request, patch string, preview []policyField) {
	ch, err := c.client(r).Channel(r.Context(), chi.URLParam(r, "name"))
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	fields, err := policy.Explain(ch.Provider, ch.PolicyYAML, ch.PolicyOverride)
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	charts, err := c.charts(r, ch.Name, "/ui/channels/"+url.PathEscape(ch.Name))
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	p, _ := c.who(r)
	c.render(w, r, http.StatusOK, "channel", "Channel "+ch.Name, map[string]any{
		"Channel": ch, "Fields": policyRows(fields), "States": statemachine.States, "Patch": patch, "Preview": preview,
		"CanOperate": p.Can("operate"), "CanPolicy": p.Can("policy"), "Charts": charts})
}

func (c *console) channelAction(w http.ResponseWriter, r *http.Request) {
	api, ctx, name, action := c.client(r), r.Context(), chi.URLParam(r, "name"), chi.URLParam(r, "action")
	var err error
	switch action {
	case "pause":
		_, err = api.Pause(ctx, name)
	case "resume":
		_, err = api.Resume(ctx, name)
	case "policy":
		patch := strings.TrimSpace(r.PostFormValue("patch"))
		if r.PostFormValue("confirm") != "yes" {
			preview, perr := previewPolicy(api, r, name, patch)
			if perr != nil {
				c.flash(r, "error", "Nothing changed: "+perr.Error())
				http.Redirect(w, r, "/ui/channels/"+url.PathEscape(name), http.StatusSeeOther)
				return
			}
			c.showChannel(w, r, patch, preview)
			return
		}
		_, err = api.PatchPolicyWithReason(ctx, name, json.RawMessage(patch), strings.TrimSpace(r.PostFormValue("reason")))
	}
	switch {
	case c.requestedFlash(r, err): // a two-person channel: a request instead
	case err != nil:
		c.flash(r, "error", "Nothing changed: "+apiMessage(err))
	default:
		c.flash(r, "ok", "Done: "+action+" applied on every instance within 2 s.")
	}
	http.Redirect(w, r, "/ui/channels/"+url.PathEscape(name), http.StatusSeeOther)
}

// previewPolicy returns the policy table as it would be after patch: each
// field's value now and after, as operator.PreviewPolicy merges it, the
// very merge the change will make.
func previewPolicy(api *client.Client, r *http.Request, name, patch string) ([]policyField, error) {
	ch, err := api.Channel(r.Context(), name)
	if err != nil {
		return nil, errors.New(apiMessage(err))
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal([]byte(patch), &set); err != nil || len(set) == 0 {
		return nil, fmt.Errorf(`the change must be a JSON object of policy fields, e.g. {"rate_per_second": 5}`)
	}
	nowFields, afterFields, err := operator.PreviewPolicy(ch, []byte(patch))
	if err != nil {
		return nil, err
	}
	now, next := policyRows(nowFields), policyRows(afterFields)
	for i := range now {
		if next[i].Value != now[i].Value || next[i].Source != now[i].Source {
			now[i].New = next[i].Value + " (" + string(next[i].Source) + ")"
		}
	}
	return now, nil
}
