package twilio

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/twilio/twilio-go/client"

	"github.com/effectd/effectd/providers/effect"
)

// Error is a failed Send or Lookup, classified by what the caller may do next.
// Its text never holds a whole phone number: all digits but the last four are
// masked.
//
// Permanent: a payload we cannot send, every 4xx but 429 (among them 21211
// invalid number, 21610 unsubscribed, 21612, 21614, 21408, 21606, and 20003
// authentication). Retryable: 429 or code 20429 (honouring Retry-After), 5xx,
// and transport failures before the request was written. Retryable and maybe
// sent: failures after the request was written (timeouts, resets), 502 and 504
// (a gateway gave up on a Twilio that may have acted), and a success answer
// that could not be read.
type Error struct {
	Op      string // "send" or "lookup"
	To      string // recipient, printed masked
	Status  int    // HTTP status; 0 when no answer came
	Code    int    // Twilio error code; 0 when none
	Message string // Twilio's message or the failure

	class effect.Class
	err   error
}

// Error describes the failure with the recipient's number masked.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("twilio: " + e.Op)
	if e.To != "" {
		b.WriteString(" to " + maskNumber(e.To))
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": status %d", e.Status)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " code %d", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return maskDigits(b.String())
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.err }

// Retryable reports whether trying again later may succeed.
func (e *Error) Retryable() bool { return e.class.Retryable }

// MaybeSent reports whether Twilio may have created the message anyway.
func (e *Error) MaybeSent() bool { return e.class.MaybeSent }

// RetryAfter is how long Twilio asked us to wait, 0 when it did not say.
func (e *Error) RetryAfter() time.Duration { return e.class.RetryAfter }

// classify turns an error from twilio-go into an *Error, using what tr saw.
func classify(op, to string, err error, tr *callTransport) *Error {
	e := &Error{Op: op, To: to, Status: tr.status(), Message: err.Error(), err: err}
	var rest *client.TwilioRestError
	if errors.As(err, &rest) {
		e.Status = cmp.Or(rest.Status, e.Status)
		e.Code, e.Message = rest.Code, rest.Message
	}
	switch {
	case e.Status == 0: // no answer
		e.class = effect.Class{Retryable: true, MaybeSent: tr.written()}
	case e.Status < 300: // an answer twilio-go could not read
		e.class = effect.Class{Retryable: true, MaybeSent: true}
	case e.Status == http.StatusTooManyRequests || e.Code == 20429:
		e.class = effect.Class{Retryable: true, RetryAfter: effect.ParseRetryAfter(tr.retryAfter(), time.Now())}
	case e.Status >= 500:
		e.class = effect.Class{
			Retryable:  true,
			MaybeSent:  e.Status == http.StatusBadGateway || e.Status == http.StatusGatewayTimeout,
			RetryAfter: effect.ParseRetryAfter(tr.retryAfter(), time.Now()),
		}
	}
	return e
}

// longDigits finds runs of digits long enough to be phone numbers.
var longDigits = regexp.MustCompile(`\d{7,}`)

// maskDigits masks all but the last four digits of every phone-number-long
// run of digits in s, such as numbers quoted in Twilio's messages or in URLs.
func maskDigits(s string) string {
	return longDigits.ReplaceAllStringFunc(s, maskNumber)
}

// maskNumber masks every digit of n but the last four.
func maskNumber(n string) string {
	keep := 4
	b := []byte(n)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '0' || b[i] > '9' {
			continue
		}
		if keep > 0 {
			keep--
			continue
		}
		b[i] = '*'
	}
	return string(b)
}
