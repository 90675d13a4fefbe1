package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// maxBody is the largest request body the API reads.
const maxBody = 64 << 10

// readBody reads at most maxBody bytes of r's body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%w: body: more than %d bytes", errTooLarge, maxBody)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", errMalformed, err)
	}
	return b, nil
}

// decodeObject decodes body, a single JSON object, into dst, refusing unknown
// fields, wrong types and trailing data with a message naming the problem.
func decodeObject(body []byte, dst any) error {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: the body must be a JSON object", errMalformed)
	}
	if err := checkStrings(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Errorf("%w: field %q: want a %s, got a JSON %s", errMalformed, typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return fmt.Errorf("%w: %s", errMalformed, strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the JSON object", errMalformed)
	}
	return nil
}

// checkStrings refuses a JSON body holding a string that effectd could not
// store in PostgreSQL as it was sent: bytes that are not UTF-8, a \u0000
// escape (text and jsonb cannot hold NUL), or an unpaired UTF-16 surrogate
// escape. Go's decoder would turn the first and last silently into U+FFFD and
// the second into a NUL byte that fails later as a 500. The message names the
// field by its path, such as filter.channel.
func checkStrings(body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: the body is not UTF-8", errMalformed)
	}
	var path []string // the key being read at each open object or array ("" in arrays)
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{', '[':
			path = append(path, "")
			continue
		case '}', ']':
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
			continue
		case '"':
		default:
			continue
		}
		start, bad := i+1, ""
		for i = start; i < len(body) && body[i] != '"' && bad == ""; i++ {
			if body[i] != '\\' {
				continue
			}
			i++
			r := hex4(body, i+1)
			if i >= len(body) || body[i] != 'u' || r < 0 {
				continue // a malformed escape is the decoder's to report
			}
			i += 4
			switch {
			case r == 0:
				bad = `a \u0000 (NUL) escape`
			case r >= 0xd800 && r < 0xdc00 && i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' &&
				hex4(body, i+3) >= 0xdc00 && hex4(body, i+3) < 0xe000:
				i += 6 // a surrogate pair: one character
			case r >= 0xd800 && r < 0xe000:
				bad = fmt.Sprintf(`an unpaired surrogate \u%04x`, r)
			}
		}
		if bad != "" {
			return fmt.Errorf("%w: %s holds %s, which effectd cannot store", errMalformed, fieldAt(path), bad)
		}
		if i >= len(body) {
			return nil // unterminated: the decoder reports it
		}
		j := i + 1
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j < len(body) && body[j] == ':' && len(path) > 0 {
			path[len(path)-1] = truncate(string(body[start:i]), 40)
		}
	}
	return nil
}

// fieldAt names the field that path leads to, for an error message.
func fieldAt(path []string) string {
	var keys []string
	for _, k := range path {
		if k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "a string"
	}
	return fmt.Sprintf("field %q", strings.Join(keys, "."))
}

// hex4 returns the value of the four hex digits at b[i:], or -1.
func hex4(b []byte, i int) int {
	if i < 0 || i+4 > len(b) {
		return -1
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return int(v)
}

// resolveRequest is the body of POST /v1/intents/{id}/resolve.
type resolveRequest struct {
	As          string `json:"as"`           // sent | resend | skip
	ProviderRef string `json:"provider_ref"` // required with sent
	Reason      string `json:"reason"`       // required: why, kept in the audit
	Force       bool   `json:"force"`        // with resend: past the provider's key window (needs a reason)
}

// maxRef bounds the provider reference an operator sends (operator.MaxReason the reason).
const maxRef = 255

// parseResolve decodes a resolve body into the operator event it asks for.
func parseResolve(body []byte) (statemachine.Event, resolveRequest, error) {
	var req resolveRequest
	if err := decodeObject(body, &req); err != nil {
		return "", req, err
	}
	if len(req.ProviderRef) > maxRef {
		return "", req, fmt.Errorf("%w: provider_ref: longer than %d bytes", dispatcher.ErrInvalid, maxRef)
	}
	var ev statemachine.Event
	switch req.As {
	case "sent":
		if req.Force {
			return "", req, fmt.Errorf("%w: force: only allowed when as is \"resend\"", dispatcher.ErrInvalid)
		}
		if strings.TrimSpace(req.ProviderRef) == "" {
			return "", req, fmt.Errorf("%w: provider_ref: required when as is \"sent\"", dispatcher.ErrInvalid)
		}
		ev = statemachine.ResolveSent
	case "resend", "skip":
		if req.ProviderRef != "" {
			return "", req, fmt.Errorf("%w: provider_ref: only allowed when as is \"sent\"", dispatcher.ErrInvalid)
		}
		if req.Force && req.As != "resend" {
			return "", req, fmt.Errorf("%w: force: only allowed when as is \"resend\"", dispatcher.ErrInvalid)
		}
		ev = statemachine.ResolveSend
		if req.As == "skip" {
			ev = statemachine.ResolveSkip
		}
	default:
		return "", req, fmt.Errorf("%w: as: must be \"sent\", \"resend\" or \"skip\", got %q", dispatcher.ErrInvalid, req.As)
	}
	return ev, req, operator.CheckReason(req.Reason, true)
}

// reasonRequest is the optional body of retry and cancel.
type reasonRequest struct {
	Reason string `json:"reason"`
}

// parseReason decodes an optional {"reason": "..."} body; empty is fine.
func parseReason(body []byte) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	var req reasonRequest
	if err := decodeObject(body, &req); err != nil {
		return "", err
	}
	return req.Reason, operator.CheckReason(req.Reason, false)
}

// retryRequest is the optional body of retry.
type retryRequest struct {
	Reason string `json:"reason"`
	Force  bool   `json:"force"` // send again past the provider's key window (needs a reason)
}

// parseRetry decodes an optional {"reason": "...", "force": true} body; empty is fine.
func parseRetry(body []byte) (retryRequest, error) {
	var req retryRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	if len(req.Reason) > operator.MaxReason {
		return req, fmt.Errorf("%w: reason: longer than %d bytes", dispatcher.ErrInvalid, operator.MaxReason)
	}
	return req, nil
}

// checkText refuses a path or query value that PostgreSQL cannot take as text
// (invalid UTF-8 or a NUL byte): as a query argument it would fail as a 500.
func (h *handler) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bad := ""
		if !validText(r.URL.Path) {
			bad = "the path"
		}
		for name, vs := range r.URL.Query() {
			for _, v := range vs {
				if !validText(name) || !validText(v) {
					bad = strconv.Quote(truncate(name, 40))
				}
			}
		}
		if bad != "" {
			h.fail(w, r, fmt.Errorf("%w: %s: must be UTF-8 text without NUL bytes", errMalformed, bad))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func validText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// pathID returns the {id} path parameter, a positive integer.
func pathID(r *http.Request) (int64, error) {
	s := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: id must be a positive integer, got %q", errMalformed, truncate(s, 40))
	}
	return id, nil
}

// queryInt returns the integer query parameter name in [min, max], or def when absent.
func queryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < min || v > max {
		return 0, fmt.Errorf("%w: %s: must be an integer from %d to %d, got %q", dispatcher.ErrInvalid, name, min, max, truncate(s, 40))
	}
	return v, nil
}

// queryPage reads a list's paging: limit (1 to maxLimit, default
// defaultLimit) and after, the last id of the previous page (0: from the start).
func queryPage(r *http.Request) (limit, after int64, err error) {
	if limit, err = queryInt(r, "limit", defaultLimit, 1, maxLimit); err != nil {
		return 0, 0, err
	}
	if after, err = queryInt(r, "after", 0, 0, 1<<62); err != nil {
		return 0, 0, err
	}
	return limit, after, nil
}

// queryBool returns the boolean query parameter name, false when absent.
func queryBool(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %s: must be true or false, got %q", dispatcher.ErrInvalid, name, truncate(s, 40))
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
