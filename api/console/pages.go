package console

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// apiFailed shows an error the API answered: a missing object as a 404 page,
// anything else as the API's message.
func (c *console) apiFailed(w http.ResponseWriter, r *http.Request, err error) {
	var e *client.Error
	if errors.As(err, &e) {
		c.renderError(w, r, e.Status, e.Message)
		return
	}
	c.log.ErrorContext(r.Context(), "console: admin API", "path", r.URL.Path, "err", err)
	c.renderError(w, r, http.StatusBadGateway, "The admin API did not answer; try again.")
}

// apiMessage is the text to show for an API error.
func apiMessage(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.who(r); ok {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", "Log in", map[string]any{"NoAuth": c.noAuth})
}

// login starts a session for the token in the form field "token".
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	secret := r.PostFormValue("token")
	p, ok := c.tokens.Authenticate(secret)
	if c.noAuth {
		p, ok = api.Principal{Name: "anonymous", Role: api.RoleAdmin}, true
	}
	if !ok {
		c.log.WarnContext(r.Context(), "console: login refused")
		c.logins.WithLabelValues("refused").Inc()
		c.render(w, r, http.StatusUnauthorized, "login", "Log in",
			map[string]any{"Error": "That token is not accepted. Paste the whole bearer token.", "NoAuth": c.noAuth})
		return
	}
	// A new session id at login, so that one planted before it is worth nothing.
	if err := c.sessions.RenewToken(r.Context()); err != nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Could not start a session; try again.")
		return
	}
	c.sessions.Put(r.Context(), "who", session{Principal: p, TokenHash: sha256Sum(secret)})
	c.sessions.Put(r.Context(), "csrf", rand.Text()) // the session's own CSRF token, not the login form's
	c.setLoginCookie(w, "")
	c.log.InfoContext(r.Context(), "console: login", "actor", p.Name, "role", p.Role)
	c.logins.WithLabelValues("ok").Inc()
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	p, _ := c.who(r)
	if err := c.sessions.Destroy(r.Context()); err != nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Could not end the session; try again.")
		return
	}
	c.log.InfoContext(r.Context(), "console: logout", "actor", p.Name)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// channelRow is one channel on the overview.
type channelRow struct {
	client.Channel
	Stats client.ChannelStats
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	api := c.client(r)
	chans, err := api.Channels(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	stats, err := api.Stats(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	rows := make([]channelRow, 0, len(chans))
	var inDoubt int64
	for _, ch := range chans {
		st := stats.Channels[ch.Name]
		rows = append(rows, channelRow{Channel: ch, Stats: st})
		inDoubt += ch.Counts[statemachine.InDoubt]
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", map[string]any{
		"Channels": rows, "States": statemachine.States, "InDoubt": inDoubt})
}

// listForm is the filter form of the intents page.
type listForm struct {
	Status, Channel, Delivery, Q, Since, Until string
	After                                      int64
}

// datetime-local inputs carry no zone: the console reads and shows UTC.
const localTime = "2006-01-02T15:04"

func (c *console) intents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := listForm{Status: q.Get("status"), Channel: q.Get("channel"), Delivery: q.Get("delivery"),
		Q: strings.TrimSpace(q.Get("q")), Since: q.Get("since"), Until: q.Get("until")}
	f.After, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	filter := client.Filter{Status: f.Status, Channel: f.Channel, Delivery: f.Delivery, Q: f.Q, After: f.After, Limit: 50}
	var problems []string
	for _, tf := range []struct {
		in  string
		out *time.Time
		n   string
	}{{f.Since, &filter.Since, "from"}, {f.Until, &filter.Until, "to"}} {
		if tf.in == "" {
			continue
		}
		t, err := time.Parse(localTime, tf.in)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: use YYYY-MM-DDTHH:MM (UTC)", tf.n))
			continue
		}
		*tf.out = t
	}
	api := c.client(r)
	var page client.IntentPage
	var err error
	if len(problems) == 0 {
		page, err = api.ListIntents(r.Context(), filter)
		if err != nil {
			var e *client.Error
			if !errors.As(err, &e) || e.Status >= 500 {
				c.apiFailed(w, r, err)
				return
			}
			problems = append(problems, e.Message)
		}
	}
	chans, err := api.Channels(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	next := ""
	if page.Next != nil {
		v := r.URL.Query()
		v.Set("after", strconv.FormatInt(*page.Next, 10))
		next = "/ui/intents?" + v.Encode()
	}
	p, _ := c.who(r)
	c.render(w, r, http.StatusOK, "intents", "Intents", map[string]any{
		"Form": f, "Intents": page.Intents, "Next": next, "Problems": problems, "Channels": chans,
		"States": statemachine.States, "Deliveries": []string{"accepted", "delivered", "undelivered"},
		"BulkActions": bulkActions, "CanOperate": p.Can("operate")})
}

// timelineItem is one thing that happened to an intent.
type timelineItem struct {
	At      time.Time
	Kind    string // send | lookup | callback | operator | provider event | audit
	Title   string
	Detail  string
	Ref     string
	Actor   string
	Reason  string
	Failure bool
}

// timeline merges attempts, lookups, provider events and audit entries, oldest first.
func timeline(d client.IntentDetail, events []client.ProviderEvent) []timelineItem {
	var out []timelineItem
	for _, a := range d.Attempts {
		it := timelineItem{At: a.StartedAt, Kind: a.Kind, Title: fmt.Sprintf("%s #%d: %s", a.Kind, a.Attempt, a.Outcome),
			Detail: deref(a.Error), Ref: deref(a.ProviderRef), Failure: a.Error != nil && *a.Error != ""}
		if a.Kind == "operator" {
			continue // the audit entry of the same change says who and why
		}
		out = append(out, it)
	}
	for _, e := range events {
		title := e.Provider + " " + e.Type
		if d := deref(e.Delivery); d != "" && d != e.Type {
			title += ": " + d
		}
		detail := "outcome " + e.Outcome
		if note := dispatcher.DeliveryNote(deref(e.Detail), e.Type, deref(e.Delivery)); note != "" {
			detail = note + " · " + detail
		}
		out = append(out, timelineItem{At: e.ReceivedAt, Kind: "provider event", Title: title,
			Detail: detail, Ref: deref(e.ObjectRef), Failure: deref(e.Delivery) == "undelivered"})
	}
	for _, a := range d.Audit {
		var before, after struct {
			Status   string `json:"status"`
			Reason   string `json:"reason"`
			Snapshot string `json:"snapshot"`
		}
		json.Unmarshal(a.Before, &before)
		json.Unmarshal(a.After, &after)
		reason := after.Reason
		if a.Reason != nil {
			reason = *a.Reason
		}
		title := a.Action
		if before.Status != "" && after.Status != "" {
			title += ": " + before.Status + " → " + after.Status
		}
		detail := ""
		if after.Snapshot != "" {
			detail = "bulk snapshot " + after.Snapshot
		}
		out = append(out, timelineItem{At: a.At, Kind: "audit", Title: title, Actor: a.Actor, Reason: reason, Detail: detail})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// dashboardLink returns the provider's own page for a reference, or "".
func dashboardLink(provider, ref string) string {
	switch {
	case ref == "":
		return ""
	case provider == "stripe" && strings.HasPrefix(ref, "re_"):
		return "https://dashboard.stripe.com/refunds/" + ref
	case provider == "stripe" && strings.HasPrefix(ref, "pi_"):
		return "https://dashboard.stripe.com/payments/" + ref
	case provider == "stripe" && strings.HasPrefix(ref, "tr_"):
		return "https://dashboard.stripe.com/connect/transfers/" + ref
	case provider == "twilio" && (strings.HasPrefix(ref, "SM") || strings.HasPrefix(ref, "MM")):
		return "https://console.twilio.com/us1/monitor/logs/sms/" + ref
	}
	return ""
}

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
	DryRun     *client.Settlement
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
		CanCancel: can(statemachine.Cancel)}, nil
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
	var in client.Intent
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
	case err != nil:
		c.flash(r, "error", "Nothing changed: "+apiMessage(err))
	case action != "reconcile":
		c.flash(r, "ok", fmt.Sprintf("Done: the intent is now %s.", in.Status))
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/intents/%d", id), http.StatusSeeOther)
}

// policyField is one row of the channel page's policy table.
type policyField struct {
	Name, Value string        // the field (backoff.base) and its value as a person reads it
	Source      policy.Source // default | YAML | override
	New         string        // in a preview: the value after the change, when it differs
}

// policyFields returns the rows of ch's policy table, with override as the
// channel's override.
func policyFields(ch client.Channel, override []byte) ([]policyField, error) {
	fields, err := policy.Explain(ch.Provider, ch.PolicyYAML, override)
	if err != nil {
		return nil, err
	}
	out := make([]policyField, len(fields))
	for i, f := range fields {
		out[i] = policyField{Name: f.Name, Value: policyValue(f.Name, f.Value), Source: f.Source}
	}
	return out, nil
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
	fields, err := policyFields(ch, ch.PolicyOverride)
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	p, _ := c.who(r)
	c.render(w, r, http.StatusOK, "channel", "Channel "+ch.Name, map[string]any{
		"Channel": ch, "Fields": fields, "States": statemachine.States, "Patch": patch, "Preview": preview,
		"CanOperate": p.Can("operate"), "CanPolicy": p.Can("policy")})
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
		_, err = api.PatchPolicy(ctx, name, json.RawMessage(patch))
	}
	if err != nil {
		c.flash(r, "error", "Nothing changed: "+apiMessage(err))
	} else {
		c.flash(r, "ok", "Done: "+action+" applied on every instance within 2 s.")
	}
	http.Redirect(w, r, "/ui/channels/"+url.PathEscape(name), http.StatusSeeOther)
}

// previewPolicy returns the policy table as it would be after patch: each
// field's value now and after, merged by policy.Patch as the API will.
func previewPolicy(api *client.Client, r *http.Request, name, patch string) ([]policyField, error) {
	ch, err := api.Channel(r.Context(), name)
	if err != nil {
		return nil, errors.New(apiMessage(err))
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal([]byte(patch), &set); err != nil || len(set) == 0 {
		return nil, fmt.Errorf(`the change must be a JSON object of policy fields, e.g. {"rate_per_second": 5}`)
	}
	over, err := policy.Patch(ch.Provider, ch.PolicyYAML, ch.PolicyOverride, []byte(patch))
	if err != nil {
		return nil, err
	}
	ob, err := json.Marshal(over)
	if err != nil {
		return nil, err
	}
	now, err := policyFields(ch, ch.PolicyOverride)
	if err != nil {
		return nil, err
	}
	next, err := policyFields(ch, ob)
	if err != nil {
		return nil, err
	}
	for i := range now {
		if next[i].Value != now[i].Value || next[i].Source != now[i].Source {
			now[i].New = next[i].Value + " (" + string(next[i].Source) + ")"
		}
	}
	return now, nil
}

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
	res, err := c.client(r).ApplyBulk(r.Context(), chi.URLParam(r, "snapshot"))
	if err != nil {
		c.flash(r, "error", "Nothing applied: "+apiMessage(err))
		http.Redirect(w, r, "/ui/intents", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "bulk_result", "Bulk action applied", map[string]any{"Res": res,
		"Back": "/ui/intents?" + client.Filter{Status: r.PostFormValue("status"), Channel: r.PostFormValue("channel")}.Query().Encode()})
}
