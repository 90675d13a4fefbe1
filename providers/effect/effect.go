package effect

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Meta keys every provider receives: stable facts to stamp on the object the
// call creates, so a later lookup or a provider event finds its intent.
const (
	MetaEventID  = "effectd_event_id"  // the producer's event id
	MetaIntentID = "effectd_intent_id" // effectd's intent id, in decimal
)

// Class is what a caller needs to know about a failed call. The zero Class is
// a permanent error that was certainly not sent.
type Class struct {
	Retryable  bool          // the same call may succeed later
	MaybeSent  bool          // the provider may have acted on the call anyway
	RetryAfter time.Duration // how long the provider asked to wait; 0 if it did not say
}

// Classify reads err by behaviour. An error without Retryable() is retryable
// and maybe sent; with it, maybe sent only if MaybeSent() says so; RetryAfter()
// gives the wait; a deadline exceeded anywhere in the chain is always
// retryable and maybe sent.
func Classify(err error) Class {
	c := Class{Retryable: true, MaybeSent: true}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		c.Retryable, c.MaybeSent = r.Retryable(), false
	}
	var m interface{ MaybeSent() bool }
	if errors.As(err, &m) {
		c.MaybeSent = m.MaybeSent()
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		c.RetryAfter = ra.RetryAfter()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		c.Retryable, c.MaybeSent = true, true
	}
	return c
}

// maxRetryAfter is the longest Retry-After in seconds that is believed; a
// longer one is read as absent (far enough out, it would overflow a
// time.Duration).
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110): whole seconds,
// up to a year, or an HTTP date after now. It returns 0 when v is empty,
// unreadable, not positive, more than a year of seconds, or a date not after now.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 || secs > int64(maxRetryAfter/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
