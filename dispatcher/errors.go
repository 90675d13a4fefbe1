package dispatcher

import (
	"errors"

	"github.com/effectd/effectd/statemachine"
)

// ErrNotFound is returned when an intent or channel does not exist.
var ErrNotFound = errors.New("not found")

// ErrInvalid is returned when an argument has an invalid value.
var ErrInvalid = errors.New("invalid value")

// ErrTransition is statemachine.ErrTransition: an event is not allowed from the current state.
var ErrTransition = statemachine.ErrTransition
