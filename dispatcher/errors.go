package dispatcher

import (
	"errors"
	"fmt"

	"github.com/effectd/effectd/statemachine"
)

// ErrNotFound is returned when an intent or channel does not exist.
var ErrNotFound = errors.New("not found")

// ErrInvalid is returned when an argument has an invalid value.
var ErrInvalid = errors.New("invalid value")

// ScopeError refuses something outside the caller's channels with the very
// text a missing one gets ("<What>: not found"): errors.Is(err, ErrNotFound)
// holds, and only its type tells the two apart (the admin API counts it).
type ScopeError struct{ What string }

func (e ScopeError) Error() string { return e.What + ": " + ErrNotFound.Error() }

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e ScopeError) Unwrap() error { return ErrNotFound }

// OpError names the dispatcher operation that returned Err, as in
// "dispatcher.Operate(7, requeue): …". The name is for logs and Go callers; a
// message for people (the admin API's) shows Err alone.
type OpError struct {
	Op  string // the function and its key arguments: Operate(7, requeue)
	Err error
}

func (e *OpError) Error() string { return "dispatcher." + e.Op + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// opError returns err named by the operation that format and args describe.
func opError(err error, format string, args ...any) error {
	return &OpError{Op: fmt.Sprintf(format, args...), Err: err}
}

// ErrTransition is statemachine.ErrTransition: an event is not allowed from the current state.
var ErrTransition = statemachine.ErrTransition
