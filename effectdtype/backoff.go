package effectdtype

import (
	"math/rand/v2"
	"time"
)

// Backoff is the exponential retry delay, from Base doubling up to Max, with
// equal jitter (see Delay).
type Backoff struct {
	Base Duration `json:"base" yaml:"base"`
	Max  Duration `json:"max" yaml:"max"`
}

// Delay is the wait before the attempt after attempt number attempt failed:
// d = Base·2^(attempt-1), capped at Max, then equal jitter, a delay drawn
// uniformly from [d/2, d]; never shorter than retryAfter, a provider's
// Retry-After.
func (b Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	d := b.Base.D()
	for i := 1; i < attempt && d < b.Max.D(); i++ {
		d *= 2
	}
	d = min(d, b.Max.D())
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}
