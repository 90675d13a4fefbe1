package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
)

// Recorder stores a provider event once and applies it to its intent.
type Recorder interface {
	RecordEvent(ctx context.Context, ev dispatcher.ProviderEvent) (dispatcher.EventResult, error)
}

// Channel is what the ingress needs to verify one channel's events.
type Channel struct {
	Name     string
	Provider string // twilio | stripe

	// Twilio: the auth token that signs callbacks, and the channel's
	// status_callback URL as configured (the public URL Twilio calls).
	TwilioAuthToken string
	StatusCallback  string

	// Stripe: the endpoint's signing secret (whsec_…).
	StripeSecret string
}

// Config is what NewHandler needs.
type Config struct {
	Channels   []Channel
	Recorder   Recorder
	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: no metrics registered
	Timeout    time.Duration         // bound on storing one event [5s]
}

// maxBody bounds an event's body: Twilio's forms are small, Stripe's events a
// few KiB; the largest Stripe objects stay well under this.
const maxBody = 256 << 10

type handler struct {
	chans    map[string]Channel
	rec      Recorder
	log      *slog.Logger
	timeout  time.Duration
	events   *prometheus.CounterVec // provider, result
	versions sync.Map               // Stripe API versions already warned about
}

// NewHandler returns the ingress HTTP handler.
func NewHandler(cfg Config) (http.Handler, error) {
	if cfg.Recorder == nil {
		return nil, errors.New("ingress.NewHandler: Config.Recorder is required")
	}
	h := &handler{
		chans:   map[string]Channel{},
		rec:     cfg.Recorder,
		log:     cmp.Or(cfg.Logger, slog.Default()),
		timeout: cmp.Or(cfg.Timeout, 5*time.Second),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_ingress_events_total",
			Help: "Provider events received on the ingress listener, by provider and result: applied, settled, unchanged, other_ref, orphan, duplicate, bad_signature (missing or not matching), malformed (not an event effectd can read, however signed), unknown_channel, error, api_version_mismatch.",
		}, []string{"provider", "result"}),
	}
	for _, c := range cfg.Channels {
		switch {
		case c.Provider == "twilio" && (c.TwilioAuthToken == "" || c.StatusCallback == ""):
			return nil, fmt.Errorf("ingress.NewHandler: channel %q: twilio needs an auth token and twilio.status_callback", c.Name)
		case c.Provider == "twilio":
			if _, err := url.Parse(c.StatusCallback); err != nil {
				return nil, fmt.Errorf("ingress.NewHandler: channel %q: twilio.status_callback: %w", c.Name, err)
			}
		case c.Provider == "stripe" && c.StripeSecret == "":
			return nil, fmt.Errorf("ingress.NewHandler: channel %q: stripe needs a webhook secret", c.Name)
		case c.Provider != "twilio" && c.Provider != "stripe":
			return nil, fmt.Errorf("ingress.NewHandler: channel %q: provider %q sends no events", c.Name, c.Provider)
		}
		h.chans[c.Name] = c
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(h.events); err != nil {
			return nil, fmt.Errorf("ingress.NewHandler: %w", err)
		}
	}
	return h.routes(), nil
}

// routes lists every route of the ingress listener. openapi.yaml beside this
// file documents the same set, and a test keeps the two equal.
func (h *handler) routes() chi.Router {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusNotFound, errBody("not_found", "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110: a 405 lists the methods the resource has.
		path := cmp.Or(req.URL.RawPath, req.URL.Path) // as chi routes it
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, path) {
				w.Header().Add("Allow", m)
			}
		}
		reply(w, http.StatusMethodNotAllowed, errBody("method_not_allowed", req.Method+" is not allowed here; see Allow"))
	})
	r.Post("/ingress/twilio/{channel}", h.twilio)
	r.Post("/ingress/stripe/{channel}", h.stripe)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return r
}

// channel returns the named channel of provider, or answers 404.
func (h *handler) channel(w http.ResponseWriter, r *http.Request, provider string) (Channel, bool) {
	name := chi.URLParam(r, "channel")
	c, ok := h.chans[name]
	if !ok || c.Provider != provider {
		h.events.WithLabelValues(provider, "unknown_channel").Inc()
		reply(w, http.StatusNotFound, errBody("not_found", fmt.Sprintf("no %s channel %q receives events here", provider, name)))
		return c, false
	}
	return c, true
}

// body reads a request body up to maxBody, or answers 400 or 413.
func (h *handler) body(w http.ResponseWriter, r *http.Request, c Channel) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.refuse(w, c, "malformed", http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body over %d bytes", maxBody))
		return nil, false
	case err != nil:
		h.malformed(w, c, "reading the body: "+err.Error())
		return nil, false
	}
	return b, true
}

// badSignature answers 400 bad_signature without storing anything: the
// event is not proven to come from the provider.
func (h *handler) badSignature(w http.ResponseWriter, c Channel, why string) {
	h.refuse(w, c, "bad_signature", http.StatusBadRequest, "bad_signature", why)
}

// malformed answers 400 malformed without storing anything: the body cannot
// be read as the provider's event (whether or not its signature is valid).
func (h *handler) malformed(w http.ResponseWriter, c Channel, why string) {
	h.refuse(w, c, "malformed", http.StatusBadRequest, "malformed", why)
}

// refuse counts a refused event under result, logs why at warn, and answers
// status with the error code.
func (h *handler) refuse(w http.ResponseWriter, c Channel, result string, status int, code, why string) {
	h.events.WithLabelValues(c.Provider, result).Inc()
	h.log.Warn("ingress: event refused: "+result, "provider", c.Provider, "channel", c.Name, "reason", why)
	reply(w, status, errBody(code, why))
}

// record hands a verified event to the recorder and answers.
func (h *handler) record(w http.ResponseWriter, r *http.Request, ev dispatcher.ProviderEvent) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.rec.RecordEvent(ctx, ev)
	if err != nil {
		h.events.WithLabelValues(ev.Provider, "error").Inc()
		h.log.Error("ingress: storing an event failed; the provider will retry", "provider", ev.Provider, "channel", ev.Channel, "event", ev.EventID, "error", err)
		reply(w, http.StatusServiceUnavailable, errBody("unavailable", "the event could not be stored; retry later"))
		return
	}
	if res.Duplicate {
		h.events.WithLabelValues(ev.Provider, "duplicate").Inc()
		reply(w, http.StatusOK, map[string]any{"outcome": "duplicate"})
		return
	}
	h.events.WithLabelValues(ev.Provider, res.Outcome).Inc()
	out := map[string]any{"outcome": res.Outcome}
	if res.IntentID != 0 {
		out["intent_id"] = res.IntentID
		out["delivery"] = nil // not known yet
		if res.To != "" {
			out["delivery"] = res.To
		}
	}
	reply(w, http.StatusOK, out)
}

func errBody(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// intentID reads effectd's intent id from a string; 0 when absent or malformed.
func intentID(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
