package effectdtype

import "errors"

// The errors both the dispatcher (the engine) and the operator service
// return, declared once here so that a caller classifies either's with one
// errors.Is; dispatcher and operator name them too.
var (
	// ErrNotFound is returned when an intent, channel, snapshot or request does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is returned when an argument has an invalid value.
	ErrInvalid = errors.New("invalid value")
)

// OpError names the operation that returned Err, its package first, as in
// "operator.Operate(7, requeue): …". The name is for logs and Go callers; a
// message for people (the admin API's) shows Err alone.
type OpError struct {
	Op  string // the package, the function and its key arguments: operator.Operate(7, requeue)
	Err error
}

func (e *OpError) Error() string { return e.Op + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }
