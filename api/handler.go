package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// Reconciler settles one in-doubt intent now, or reports what it would do.
type Reconciler interface {
	Reconcile(ctx context.Context, id int64, dryRun bool, actor string) (effectdtype.ReconcileResult, error)
}

// Config is what NewHandler needs.
type Config struct {
	Pool           *pgxpool.Pool
	Operator       *operator.Service               // the operations the routes call, in the storage mode decided at start-up; nil: operator.New(Pool, nil), one PostgreSQL's
	Tokens         []Token                         // bearer tokens; see TokensFromEnv
	InsecureNoAuth bool                            // no tokens: every caller is "anonymous" and may do anything (loopback only; see CheckBind)
	Reconciler     Reconciler                      // nil: the reconcile route answers 503
	Sweeper        Sweeper                         // nil: the sweep route answers 503
	Registry       *prometheus.Registry            // served at /metrics; nil: a new registry
	Logger         *slog.Logger                    // nil: slog.Default()
	Ready          func(ctx context.Context) error // nil: ping the database and check migrations are current
}

// handler holds what the route handlers share.
type handler struct {
	svc        *operator.Service
	tokens     Tokens
	noAuth     bool
	reconciler Reconciler
	sweeper    Sweeper
	registry   *prometheus.Registry
	log        *slog.Logger
	ready      func(ctx context.Context) error

	metricsHandler http.Handler
	bulkRows       *prometheus.CounterVec // effectd_bulk_rows_total{event, result}
	approvals      *prometheus.CounterVec // effectd_approval_requests_total{channel, action, state}
	refused        *prometheus.CounterVec // requests refused by access control, by reason
}

// NewHandler returns the admin API's HTTP handler.
func NewHandler(cfg Config) (http.Handler, error) {
	if cfg.Pool == nil {
		return nil, errors.New("api.NewHandler: Config.Pool is required")
	}
	if len(cfg.Tokens) == 0 && !cfg.InsecureNoAuth {
		return nil, errors.New("api.NewHandler: no tokens; set EFFECTD_ADMIN_TOKEN or allow insecure no-auth")
	}
	for _, t := range cfg.Tokens {
		if t.Name == "" || !t.Role.Valid() {
			return nil, fmt.Errorf("api.NewHandler: token %q has an empty name or an unknown role %q", t.Name, t.Role)
		}
	}
	if cfg.Operator == nil {
		cfg.Operator = operator.New(cfg.Pool, nil)
	}
	h := &handler{
		svc:        cfg.Operator,
		tokens:     cfg.Tokens,
		noAuth:     cfg.InsecureNoAuth,
		reconciler: cfg.Reconciler,
		sweeper:    cfg.Sweeper,
		registry:   cmp.Or(cfg.Registry, prometheus.NewRegistry()),
		log:        cmp.Or(cfg.Logger, slog.Default()),
		ready:      cfg.Ready,
	}
	if h.ready == nil {
		h.ready = poolReady(cfg.Pool)
	}
	h.bulkRows = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "effectd_bulk_rows_total",
		Help: "Intents a bulk action applied to, or skipped because they changed since the snapshot."}, []string{"event", "result"})
	h.approvals = newApprovalMetrics()
	if err := h.registry.Register(h.approvals); err != nil {
		return nil, fmt.Errorf("api.NewHandler: register metrics: %w", err)
	}
	if err := h.registry.Register(h.bulkRows); err != nil {
		return nil, fmt.Errorf("api.NewHandler: register metrics: %w", err)
	}
	h.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "effectd_admin_refused_total",
		Help: "Admin API requests refused: unauthorized (no or unknown token), forbidden (the role may not), out_of_scope (a channel the token does not see, answered 404)."},
		[]string{"reason"})
	for _, reason := range []string{"unauthorized", "forbidden", "out_of_scope"} {
		h.refused.WithLabelValues(reason)
	}
	if err := h.registry.Register(h.refused); err != nil {
		return nil, fmt.Errorf("api.NewHandler: register metrics: %w", err)
	}
	if err := h.registry.Register(newCollector(h)); err != nil {
		return nil, fmt.Errorf("api.NewHandler: register metrics: %w", err)
	}
	h.metricsHandler = promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{Registry: h.registry, EnableOpenMetrics: true})
	return h.routes(), nil
}

// logRequests logs one line per request: at debug when it succeeds, at warn
// when it fails. It logs the route pattern, never headers or bodies.
func (h *handler) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, new(Principal)))
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		level := slog.LevelDebug
		if ww.Status() >= 500 {
			level = slog.LevelWarn
		}
		route := r.URL.Path
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		h.log.Log(r.Context(), level, "admin api request", "method", r.Method, "route", route,
			"status", ww.Status(), "duration", time.Since(start), "actor", principalOf(r).Name)
	})
}
