package dispatcher

import (
	"fmt"
	"time"

	"github.com/effectd/effectd/statemachine"
)

// KeyWindow is how long a provider of this kind is trusted to remember an
// idempotency key, counted from the intent's creation (no attempt is older);
// 0 when the dispatcher relies on no key window. Stripe keeps a key for at least
// 24 hours after its first use: 23 hours from creation leaves an hour to spare.
// A provider declares its own window (KeyWindowed), and New refuses one that
// differs from this; Operate, which has no provider at hand, reads it here.
//
// Within the window, repeating a call that may have been applied is safe: the
// provider replays the first result. Past it, the provider has forgotten the
// key and would apply the call again, so a maybe-sent intent is sent again only
// after a lookup proved the effect absent, or when an operator forces it with
// a reason (audited).
func KeyWindow(kind string) time.Duration {
	if kind == "stripe" {
		return 23 * time.Hour
	}
	return 0
}

// PastKeyWindow reports whether an intent of kind created at created is past
// its provider's key window at now.
func PastKeyWindow(kind string, created, now time.Time) bool {
	w := KeyWindow(kind)
	return w > 0 && now.Sub(created) >= w
}

// KeyWindowError refuses to send again an intent that may have been applied
// once its provider has forgotten the idempotency key.
type KeyWindowError struct {
	IntentID int64
	Status   statemachine.State
	Age      time.Duration // since the intent was created
	Window   time.Duration
}

func (e *KeyWindowError) Error() string {
	return fmt.Sprintf("%s: intent %d is %s and may have been applied; it was created %s ago, past its provider's %s idempotency-key window, "+
		"so sending it again could apply it twice: reconcile it (a lookup that proves it absent sends it again), resolve it as sent or skip, "+
		"or repeat with \"force\": true and a reason",
		statemachine.ErrTransition, e.IntentID, e.Status, e.Age.Round(time.Minute), e.Window)
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *KeyWindowError) Unwrap() error { return statemachine.ErrTransition }
