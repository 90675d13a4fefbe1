package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// scope is what one principal may see of the channels, read once per request.
type scope struct {
	p       Principal
	visible []string            // the channels it sees; nil: every channel
	redact  map[string][]string // fields masked for it, by channel
}

// scopeOf reads the channels' redaction lists and keeps those p sees.
func (h *handler) scopeOf(ctx context.Context, p Principal) (scope, error) {
	s := scope{p: p}
	if !p.scoped() && p.Can(ActionUnmask) {
		return s, nil
	}
	redactions, err := h.svc.Redactions(ctx)
	if err != nil {
		return s, fmt.Errorf("channel scope: %w", err)
	}
	s.visible, s.redact = []string{}, map[string][]string{}
	for _, c := range redactions {
		if !p.CanSee(c.Channel) {
			continue
		}
		s.visible = append(s.visible, c.Channel)
		if !p.Can(ActionUnmask) && len(c.Fields) > 0 {
			s.redact[c.Channel] = c.Fields
		}
	}
	if !p.scoped() {
		s.visible = nil
	}
	return s, nil
}

// intent returns r as the principal may see it: the channel's redacted
// payload fields masked, in the payload and wherever an error quotes them.
func (s scope) intent(r effectdtype.IntentRow) effectdtype.IntentRow {
	fields := s.redact[r.Channel]
	if len(fields) == 0 {
		return r
	}
	if r.LastError != nil {
		e := dispatcher.RedactText(*r.LastError, r.Payload, fields)
		r.LastError = &e
	}
	r.Payload = dispatcher.RedactPayload(r.Payload, fields)
	return r
}

// detail returns d as the principal may see it.
func (s scope) detail(d effectdtype.IntentDetail) effectdtype.IntentDetail {
	fields := s.redact[d.Intent.Channel]
	if len(fields) == 0 {
		return d
	}
	for i, a := range d.Attempts {
		if a.Error != nil {
			e := dispatcher.RedactText(*a.Error, d.Intent.Payload, fields)
			d.Attempts[i].Error = &e
		}
	}
	d.Intent = s.intent(d.Intent)
	return d
}

// hidden refuses a resource outside the principal's scope with the very
// answer a missing one gets (404, the same message); only the metric
// effectd_admin_refused_total tells them apart.
type hidden = operator.ScopeError

// authorizeIntent answers ErrNotFound for an intent that does not exist or
// whose channel the principal cannot see, and errForbidden when its role may
// not take action a.
func (h *handler) authorizeIntent(ctx context.Context, p Principal, id int64, a Action) error {
	if !p.scoped() && p.Can(a) {
		return nil // the action itself reports a missing intent
	}
	channel, err := h.svc.IntentChannel(ctx, id)
	if err == nil && !p.CanSee(channel) {
		return hidden{What: fmt.Sprintf("intent %d", id)}
	}
	if err != nil {
		return fmt.Errorf("intent %d: %w", id, err)
	}
	if !p.Can(a) {
		return fmt.Errorf("%w: role %s may not %s intents of channel %q", errForbidden, p.Role, a, channel)
	}
	return nil
}

// authorizeChannel is authorizeIntent for a channel.
func (h *handler) authorizeChannel(ctx context.Context, p Principal, name string, a Action) error {
	notFound := fmt.Errorf("channel %q: %w", truncate(name, 64), dispatcher.ErrNotFound)
	if !p.CanSee(name) {
		return hidden{What: fmt.Sprintf("channel %q", truncate(name, 64))}
	}
	if p.Can(a) {
		return nil // the action itself reports a missing channel
	}
	exists, err := h.svc.ChannelExists(ctx, name)
	if err != nil {
		return fmt.Errorf("channel %q: %w", truncate(name, 64), err)
	}
	if !exists {
		return notFound
	}
	return fmt.Errorf("%w: role %s may not %s channel %q", errForbidden, p.Role, a, truncate(name, 64))
}

// sees reports whether the scope includes channel.
func (s scope) sees(channel string) bool {
	return s.visible == nil || s.p.CanSee(channel)
}

// scopedGatherer leaves out of a scrape every sample labelled with a channel
// that the scope does not include.
func scopedGatherer(g prometheus.Gatherer, s scope) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := g.Gather()
		for _, f := range fams {
			kept := f.Metric[:0]
			for _, m := range f.Metric {
				if ok := func() bool {
					for _, l := range m.GetLabel() {
						if l.GetName() == "channel" && !s.sees(l.GetValue()) {
							return false
						}
					}
					return true
				}(); ok {
					kept = append(kept, m)
				}
			}
			f.Metric = kept
		}
		return fams, err
	})
}

// metrics answers GET /metrics in the Prometheus exposition format. Without
// an Authorization header it serves every channel, for the scraper; with a
// bearer token, only the samples of the token's channels (401 for an unknown one).
func (h *handler) metrics(w http.ResponseWriter, r *http.Request) {
	header := r.Header.Get("Authorization")
	if header == "" || h.noAuth {
		h.metricsHandler.ServeHTTP(w, r)
		return
	}
	p, ok := h.tokens.Authenticate(bearer(header))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="effectd"`)
		h.fail(w, r, errUnauthorized)
		return
	}
	r = r.WithContext(WithPrincipal(r.Context(), p))
	if !p.scoped() {
		h.metricsHandler.ServeHTTP(w, r)
		return
	}
	s, err := h.scopeOf(r.Context(), p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	promhttp.HandlerFor(scopedGatherer(h.registry, s), promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(w, r)
}
