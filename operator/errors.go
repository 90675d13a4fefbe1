package operator

import (
	"fmt"

	"github.com/effectd/effectd/effectdtype"
)

// ErrNotFound is returned when an intent, channel, snapshot or approval
// request does not exist (effectdtype.ErrNotFound, as the dispatcher's).
var ErrNotFound = effectdtype.ErrNotFound

// ErrInvalid is returned when an argument has an invalid value
// (effectdtype.ErrInvalid, as the dispatcher's).
var ErrInvalid = effectdtype.ErrInvalid

// ScopeError refuses something outside the caller's channels with the very
// text a missing one gets ("<What>: not found"): errors.Is(err, ErrNotFound)
// holds, and only its type tells the two apart (the admin API counts it).
type ScopeError struct{ What string }

func (e ScopeError) Error() string { return e.What + ": " + ErrNotFound.Error() }

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e ScopeError) Unwrap() error { return ErrNotFound }

// OpError names the operator operation that returned Err, as in
// "operator.Operate(7, requeue): …" (effectdtype.OpError).
type OpError = effectdtype.OpError

// opError returns err named by the operator operation that format and args describe.
func opError(err error, format string, args ...any) error {
	return &OpError{Op: "operator." + fmt.Sprintf(format, args...), Err: err}
}
