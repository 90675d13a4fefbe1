package dispatcher

import (
	"fmt"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// ErrNotFound is returned when an intent or channel does not exist (effectdtype.ErrNotFound).
var ErrNotFound = effectdtype.ErrNotFound

// ErrInvalid is returned when an argument has an invalid value (effectdtype.ErrInvalid).
var ErrInvalid = effectdtype.ErrInvalid

// OpError names the dispatcher operation that returned Err, as in
// "dispatcher.Reconcile(7): …" (effectdtype.OpError).
type OpError = effectdtype.OpError

// opError returns err named by the dispatcher operation that format and args describe.
func opError(err error, format string, args ...any) error {
	return &OpError{Op: "dispatcher." + fmt.Sprintf(format, args...), Err: err}
}

// ErrTransition is statemachine.ErrTransition: an event is not allowed from the current state.
var ErrTransition = statemachine.ErrTransition
