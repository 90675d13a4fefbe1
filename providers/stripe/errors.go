package stripe

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	stripeapi "github.com/stripe/stripe-go/v76"

	"github.com/effectd/effectd/providers/effect"
)

// Error is a failed Stripe call, classified by what the caller may do next.
type Error struct {
	Op        string       // what was attempted, e.g. "stripe refund"
	Status    int          // HTTP status; 0 when no answer arrived
	Type      string       // Stripe's error type, e.g. "idempotency_error"
	Code      string       // Stripe's error code, e.g. "card_declined"
	Message   string       // Stripe's message or a description of the failure
	RequestID string       // Stripe's Request-Id, for support
	Replayed  bool         // the answer was a replay of the key's saved first response
	class     effect.Class // what the caller may do next
	err       error        // the underlying error, if any
}

// Error describes the failure in one line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Type == string(stripeapi.ErrorTypeIdempotency) && e.Status == http.StatusBadRequest {
		b.WriteString("IDEMPOTENCY KEY REUSED WITH DIFFERENT PARAMETERS (never retried; the payload changed after the first attempt): ")
	}
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
		if e.Type != "" {
			b.WriteString(" " + e.Type)
		}
		if e.Code != "" {
			b.WriteString("/" + e.Code)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Replayed {
		b.WriteString(" (replayed)")
	}
	if e.RequestID != "" {
		b.WriteString(" [" + e.RequestID + "]")
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.err }

// Retryable reports whether repeating the call with the same key may succeed.
func (e *Error) Retryable() bool { return e.class.Retryable }

// MaybeSent reports whether Stripe may have acted on the call.
func (e *Error) MaybeSent() bool { return e.class.MaybeSent }

// RetryAfter is the delay Stripe asked for, or 0.
func (e *Error) RetryAfter() time.Duration { return e.class.RetryAfter }

// permanent returns a non-retryable error that was certainly not sent.
func permanent(op string, format string, args ...any) *Error {
	return &Error{Op: op, Message: fmt.Sprintf(format, args...)}
}

// exchange is what the transport saw of one call.
type exchange struct {
	wrote  atomic.Bool // the whole request was written (set by the transport's writer)
	status int
	header http.Header
}

// classify turns the error of a call into an *Error.
func classify(op string, err error, x *exchange) *Error {
	e := &Error{Op: op, err: err, Message: err.Error()}
	var se *stripeapi.Error
	if errors.As(err, &se) {
		e.Type, e.Code, e.Message, e.RequestID = string(se.Type), string(se.Code), se.Msg, se.RequestID
		if e.Status = se.HTTPStatusCode; e.Status == 0 {
			e.Status = x.status
		}
	} else {
		e.Status = x.status
	}
	if e.Status == 0 {
		// No answer: a transport error or timeout. Once the request was
		// written Stripe may have acted; the same key makes repeating safe.
		e.class = effect.Class{Retryable: true, MaybeSent: x.wrote.Load()}
		return e
	}
	h := x.header
	e.Replayed = h.Get("Idempotent-Replayed") == "true"
	e.class.RetryAfter = effect.ParseRetryAfter(h.Get("Retry-After"), time.Now())
	switch h.Get("Stripe-Should-Retry") {
	case "true":
		e.class.Retryable = true
	case "false":
		e.class.Retryable = false
	default:
		e.class.Retryable = e.Status == http.StatusConflict || e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return e
}

// recorder is an http.RoundTripper that notes, for calls that carry an
// *exchange in their context, whether the request was written and what status
// and headers came back. stripe-go drops both for some failures.
//
// It also sends Idempotency-Key under a spelling that net/http does not look
// for: with the canonical one, net/http silently resends a written POST when
// a reused HTTP/1 connection dies before the answer, so Stripe would see a
// call that the dispatcher never records. A lost answer is instead returned,
// as maybe sent, and the dispatcher records it and decides. Header names are
// case-insensitive (HTTP/2 lowercases them all), so Stripe reads the same key.
type recorder struct{ next http.RoundTripper }

type exchangeKey struct{}

// idempotencyHeader is how Idempotency-Key is sent; see recorder.
const idempotencyHeader = "idempotency-key"

// RoundTrip implements http.RoundTripper.
func (t recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if key, ok := req.Header["Idempotency-Key"]; ok {
		req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
		req.Header.Del("Idempotency-Key")
		req.Header[idempotencyHeader] = key
	}
	res, err := t.next.RoundTrip(req)
	if x, ok := req.Context().Value(exchangeKey{}).(*exchange); ok && res != nil {
		x.status, x.header = res.StatusCode, res.Header
	}
	return res, err
}
