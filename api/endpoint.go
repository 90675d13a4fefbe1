package api

import (
	"errors"
	"net/http"
)

// endpoint is the work of one route: it decodes the request, checks the
// caller's scope, calls one operation and returns the answer. It never
// writes to w itself (w is only for reading a bounded body).
type endpoint[T any] func(w http.ResponseWriter, r *http.Request) (T, error)

// handle serves e: its answer as JSON with 200, or its error through fail,
// the one mapping of errors to HTTP status.
func handle[T any](h *handler, e endpoint[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := e(w, r)
		var acc *accepted
		if errors.As(err, &acc) { // the action became an approval request
			writeJSON(w, http.StatusAccepted, acc.body)
			return
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
