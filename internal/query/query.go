package query

import _ "embed"

// Claim moves up to $3 due PENDING intents of channel $1 to SENDING under a
// lease of $2, within the channel's shared rate ($4 a second, burst $5; 0: none).
//
//go:embed claim.sql
var Claim string

// SlowDown empties channel $1's shared bucket for about $2 seconds at rate $3.
//
//go:embed slow_down.sql
var SlowDown string

// TakeExpired extends the lease of up to $1 SENDING rows of channels $2 whose
// lease expired, so that one reconciler settles each, and returns them.
//
//go:embed take_expired.sql
var TakeExpired string

// ReleaseLease ends the lease of SENDING intent $1 (attempt $2, key $3) now,
// for the next reconciler.
//
//go:embed release_lease.sql
var ReleaseLease string

// Prune deletes up to $2 terminal intents of channel $1 older than $3, with their attempts.
//
//go:embed prune.sql
var Prune string

// Channels reads the registered channels with their policy and pause flag.
//
//go:embed channels.sql
var Channels string

// Register upserts a channel from the configuration.
//
//go:embed register.sql
var Register string

// Enqueue calls effectd.enqueue with named arguments.
//
//go:embed enqueue.sql
var Enqueue string

// EventIntent locks the intent of channel $1 that an event is about: intent
// id $2, or when 0 the intent whose provider reference is $3.
//
//go:embed event_intent.sql
var EventIntent string

// SettleByEvent settles intent $1 (attempts $2, status $3) as SENT with
// reference $4 and delivery $6 with detail $7 (empty: unchanged), fenced, and
// records an attempt of kind callback with outcome $5.
//
//go:embed settle_by_event.sql
var SettleByEvent string

// SetDelivery moves intent $1's delivery from $2 (” = unknown) to $3 with
// detail $4, as a compare-and-set.
//
//go:embed set_delivery.sql
var SetDelivery string

// PollDue lists up to $3 SENT intents of channel $1 due for a delivery poll
// by the delays $2.
//
//go:embed poll_due.sql
var PollDue string
