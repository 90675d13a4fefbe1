package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// The API's own error vocabulary; effectdtype, operator and statemachine supply the rest.
var (
	errMalformed    = errors.New("malformed request")
	errUnauthorized = errors.New("missing or unknown bearer token")
	errForbidden    = errors.New("forbidden")
	errTooLarge     = errors.New("request body too large")
	errNoRoute      = errors.New("no such route")
	errMethod       = errors.New("method not allowed on this route")
	errUnavailable  = errors.New("unavailable")
)

// errorTable is the one mapping of errors to HTTP status and error code.
// The first entry that errors.Is matches wins; anything else is a 500.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{errMalformed, http.StatusBadRequest, "malformed"},
	{policy.ErrUnknownField, http.StatusBadRequest, "malformed"}, // a policy patch naming no field of a policy
	{errUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{errForbidden, http.StatusForbidden, "forbidden"},
	{operator.ErrSelfApproval, http.StatusForbidden, "self_approval"},
	{operator.ErrExpired, http.StatusGone, "expired"},
	{operator.ErrApprovalRequired, http.StatusConflict, "approval_required"},
	{effectdtype.ErrNotFound, http.StatusNotFound, "not_found"},
	{errNoRoute, http.StatusNotFound, "not_found"},
	{errMethod, http.StatusMethodNotAllowed, "method_not_allowed"},
	{statemachine.ErrTransition, http.StatusConflict, "conflict"},
	{errTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{effectdtype.ErrInvalid, http.StatusUnprocessableEntity, "invalid"},
	{errUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// fail writes err as a JSON error response. An unclassified error is logged
// and answered with a generic 500, so internals never leak to the caller.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var body errorBody
	status := http.StatusInternalServerError
	body.Error.Code, body.Error.Message = "internal", "internal error"
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			status, body.Error.Code, body.Error.Message = e.status, e.code, message(err, e.err)
			break
		}
	}
	h.countRefusal(r, err)
	if status == http.StatusInternalServerError {
		h.log.ErrorContext(r.Context(), "admin api: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	} else if status >= 500 {
		h.log.WarnContext(r.Context(), "admin api: unavailable", "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, body)
}

// message is what an error answer tells the caller: err's text without the
// operations of the operator service and the dispatcher it passed through
// (an effectdtype.OpError's name is for the logs) and without the words of the sentinel it was classified by where
// it leads its layer ("forbidden: role viewer …" under the code forbidden
// reads "role viewer …"). Each layer's text holds its inner one verbatim
// (fmt's %w), so the inner text is replaced by its own message in place.
func message(err, sentinel error) string {
	if op, ok := err.(*effectdtype.OpError); ok {
		return message(op.Err, sentinel)
	}
	text, inner := err.Error(), errors.Unwrap(err)
	if inner == nil {
		return text
	}
	innerText := inner.Error()
	if inner == sentinel {
		if rest, ok := strings.CutPrefix(text, innerText+": "); ok {
			return rest
		}
		return text
	}
	i := strings.LastIndex(text, innerText)
	if i < 0 {
		return text
	}
	return text[:i] + message(inner, sentinel) + text[i+len(innerText):]
}

// Indentation grows a document by up to twice its nesting depth per value:
// a 10 KB payload nested thousands deep would answer 50 MB. Only a document
// within both bounds below is indented for people; any other is compact.
const (
	maxIndentBytes = 64 << 10
	maxIndentDepth = 16
)

// writeJSON writes v as a JSON response, indented when it is small and shallow.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a value that JSON cannot carry gets here: never a client's doing.
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	if len(b) <= maxIndentBytes && depth(b) <= maxIndentDepth {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			b = out.Bytes()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// depth returns the deepest nesting of objects and arrays in the JSON text b.
func depth(b []byte) int {
	d, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// countRefusal counts a request that access control refused, and logs who was
// refused what (a refusal for an unknown token only counts: scanners are noisy).
func (h *handler) countRefusal(r *http.Request, err error) {
	var hid hidden
	reason := ""
	switch {
	case errors.Is(err, errUnauthorized):
		h.refused.WithLabelValues("unauthorized").Inc()
		return
	case errors.Is(err, errForbidden):
		reason = "forbidden"
	case errors.As(err, &hid):
		reason = "out_of_scope"
	default:
		return
	}
	h.refused.WithLabelValues(reason).Inc()
	h.log.InfoContext(r.Context(), "admin api: refused", "reason", reason, "method", r.Method, "path", r.URL.Path,
		"actor", principalOf(r).Name)
}
