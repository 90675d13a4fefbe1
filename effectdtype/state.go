package effectdtype

// State is the status of an intent as stored in effectd.intents.status.
// statemachine holds the table of the events that move it.
type State string

// The states of an intent.
const (
	Pending   State = "PENDING"   // waiting to be claimed, now or at next_attempt_at
	Sending   State = "SENDING"   // claimed by a worker under a lease; a call may be in flight
	Sent      State = "SENT"      // the provider applied the effect
	Failed    State = "FAILED"    // permanent error or attempts exhausted
	InDoubt   State = "IN_DOUBT"  // a lease expired and nothing could settle it: waits for an operator
	Skipped   State = "SKIPPED"   // deliberately not sent
	Cancelled State = "CANCELLED" // cancelled by an operator before sending
)

// States lists every state, in lifecycle order.
var States = []State{Pending, Sending, Sent, Failed, InDoubt, Skipped, Cancelled}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, x := range States {
		if s == x {
			return true
		}
	}
	return false
}

// Delivery is what became of a SENT intent, as stored in effectd.intents.delivery.
// Unknown (NULL in the database) until the provider says something.
// statemachine holds the table of the reports that move it.
type Delivery string

// The deliveries.
const (
	Unknown     Delivery = ""            // nothing known yet (NULL)
	Accepted    Delivery = "accepted"    // the provider has it; the outcome is not final
	Delivered   Delivery = "delivered"   // it reached its destination (final unless the provider reverses it)
	Undelivered Delivery = "undelivered" // it did not, or the provider reversed it (final)
)

// Deliveries lists every delivery, in order of progress.
var Deliveries = []Delivery{Unknown, Accepted, Delivered, Undelivered}

// Final reports whether a delivery waits for nothing more: delivered may still
// be reversed, but nothing is polled for it.
func (d Delivery) Final() bool { return d == Delivered || d == Undelivered }

// Valid reports whether d is a known delivery other than Unknown.
func (d Delivery) Valid() bool { return d == Accepted || d == Delivered || d == Undelivered }
