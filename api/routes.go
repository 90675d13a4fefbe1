package api

import (
	"cmp"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// methods are the methods a 405's Allow header may name.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// routes lists every route of the admin API. openapi.yaml documents the same
// set, and a test keeps the two equal.
func (h *handler) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, h.logRequests)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { h.fail(w, r, errNoRoute) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110: a 405 lists the methods the resource has.
		path := cmp.Or(req.URL.RawPath, req.URL.Path) // as chi routes it
		for _, m := range methods {
			if r.Match(chi.NewRouteContext(), m, path) {
				w.Header().Add("Allow", m)
			}
		}
		h.fail(w, req, errMethod)
	})

	r.Get("/healthz", handle(h, h.healthz))
	r.Get("/readyz", handle(h, h.readyz))
	r.Get("/metrics", h.metrics)

	r.Route("/v1", func(r chi.Router) {
		r.Use(h.authenticate, h.checkText)
		r.Get("/intents", handle(h, h.listIntents))
		r.Get("/intents/{id}", handle(h, h.getIntent))
		r.Get("/channels", handle(h, h.listChannels))
		r.Get("/channels/{name}", handle(h, h.getChannel))
		r.Get("/stats", handle(h, h.stats))
		r.Get("/charts", handle(h, h.charts))
		r.Get("/provider-events", handle(h, h.listEvents))
		// Each write checks the principal's scope (404) and role (403) itself,
		// so that a channel out of scope is never told apart from a missing one.
		r.Post("/intents/{id}/retry", handle(h, h.retryIntent))
		r.Post("/intents/{id}/cancel", handle(h, h.cancelIntent))
		r.Post("/intents/{id}/resolve", handle(h, h.resolveIntent))
		r.Post("/intents/{id}/reconcile", handle(h, h.reconcileIntent))
		r.Post("/channels/{name}/pause", handle(h, h.pauseChannel))
		r.Post("/channels/{name}/resume", handle(h, h.resumeChannel))
		r.Patch("/channels/{name}/policy", handle(h, h.patchPolicy))
		// Two-person approval: each route checks scope (404) and the approve right (403) itself.
		r.Get("/approvals", handle(h, h.listApprovals))
		r.Get("/approvals/{id}", handle(h, h.getApproval))
		r.Post("/approvals/{id}/approve", handle(h, h.approveRequest))
		r.Post("/approvals/{id}/reject", handle(h, h.rejectRequest))
		// Bulk actions see only the principal's channels; the role is checked first.
		r.With(h.require(ActionOperate)).Post("/intents/bulk", handle(h, h.createBulk))
		r.With(h.require(ActionOperate)).Post("/intents/bulk/{snapshot}/apply", handle(h, h.applyBulk))
		// A sweep reads a provider on behalf of an operator: the role first, then the channel's scope (404).
		r.With(h.require(ActionOperate)).Post("/sweeps", handle(h, h.createSweep))
	})
	return r
}
