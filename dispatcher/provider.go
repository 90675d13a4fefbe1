package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Provider sends one effect. key is the intent's idempotency key, identical on
// every attempt; meta holds stable facts to stamp on the created object
// (effectd_event_id, effectd_intent_id). It returns the provider's reference.
//
// Errors are classified by behaviour, through the optional methods
// Retryable() bool, MaybeSent() bool and RetryAfter() time.Duration. An error
// without them is treated as retryable and maybe sent.
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

// Keyed is a Provider whose calls are deduplicated by the idempotency key, so a
// call that may have been sent is safely repeated with the same key.
type Keyed interface {
	Idempotent() bool
}

// Meta keys that every provider receives.
const (
	MetaEventID  = "effectd_event_id"
	MetaIntentID = "effectd_intent_id"
)

// errorClass is what the dispatcher needs to know about a provider error.
type errorClass struct {
	retryable  bool
	maybeSent  bool
	retryAfter time.Duration
}

func classify(err error) errorClass {
	c := errorClass{retryable: true, maybeSent: true}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		c.retryable = r.Retryable()
		c.maybeSent = false
	}
	var m interface{ MaybeSent() bool }
	if errors.As(err, &m) {
		c.maybeSent = m.MaybeSent()
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		c.retryAfter = ra.RetryAfter()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		c.retryable, c.maybeSent = true, true
	}
	return c
}
