package dispatcher

import (
	"context"
	"encoding/json"
	"time"

	"github.com/effectd/effectd/providers/effect"
)

// Provider sends one effect. key is the intent's idempotency key, identical on
// every attempt; meta holds stable facts to stamp on the created object
// (effect.MetaEventID, effect.MetaIntentID). It returns the provider's
// reference.
//
// Errors are classified by behaviour with effect.Classify, through the
// optional methods Retryable() bool, MaybeSent() bool and
// RetryAfter() time.Duration. An error without them is treated as retryable
// and maybe sent.
type Provider interface {
	Send(ctx context.Context, key string, payload json.RawMessage, meta map[string]string) (ref string, err error)
}

// Looker is a Provider that can tell whether an in-doubt call took effect.
// created is when the intent was recorded (no attempt is older); claimed is
// when the in-doubt attempt began. found=true carries the reference; found=false
// with a nil error proves the effect absent; an error means it cannot tell.
type Looker interface {
	Lookup(ctx context.Context, key string, payload json.RawMessage, meta map[string]string, created, claimed time.Time) (ref string, found bool, err error)
}

// Replayer is a Looker whose lookup, for an intent created at created, repeats
// the call with its key: the provider answers with the first call's result,
// or applies the effect now if the first call never arrived. A dry run does
// not call such a lookup, since it may change the provider's books.
type Replayer interface {
	LookupReplays(created time.Time) bool
}

// Keyed is a Provider whose calls are deduplicated by the idempotency key, so a
// call that may have been sent is safely repeated with the same key.
type Keyed interface {
	Idempotent() bool
}

// KeyWindowed is a Keyed provider that remembers a key for a while only:
// KeyWindow is how long, counted from the intent's creation, it is trusted to.
// New refuses a channel whose provider declares a window other than
// KeyWindow(kind), the window the operator's checks use where no provider is
// at hand, so the two never drift apart.
type KeyWindowed interface {
	KeyWindow() time.Duration
}

// Lister is a Provider whose effects can be listed for the reconciliation
// sweep (Sweep).
type Lister interface {
	// List returns the effects created in [since, until) that the listing
	// covers: objects carrying effectd's metadata, or every message of the
	// channel's sender. It fails rather than return a partial list.
	List(ctx context.Context, since, until time.Time) ([]effect.Object, error)
	// Match returns the Object.Match an effect of payload would carry ("" when
	// objects are matched by metadata), and whether List covers such an
	// effect at all (false: the sweep cannot tell whether it is missing).
	Match(payload json.RawMessage) (match string, listed bool)
	// Held returns the effects the provider holds for one intent whatever
	// their time: the object its reference ref names ("" none), and those
	// carrying its identity (meta: effect.MetaEventID, effect.MetaIntentID)
	// or, where the provider keeps none, its payload's Match. proven reports,
	// when it returns none, that the provider holds none; false where a miss
	// proves nothing (a listing cut at its limit, an eventually consistent
	// search). It changes nothing at the provider.
	Held(ctx context.Context, ref string, payload json.RawMessage, meta map[string]string, created time.Time) (objects []effect.Object, proven bool, err error)
}
