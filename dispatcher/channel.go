package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"

	"github.com/effectd/effectd/dispatcher/internal/query"
)

// Channel is a named destination bound to one provider and one policy.
type Channel struct {
	Name       string
	Kind       string // webhook | stripe | twilio
	Provider   Provider
	Policy     Policy // from the configuration; the admin API's overrides apply on top
	MaxPayload int    // bytes; 0 means 64 KiB
}

// Register records channels in the database, so that effectd.enqueue accepts
// them and every instance sees their policy. Overrides made through the admin
// API are kept.
func Register(ctx context.Context, pool *pgxpool.Pool, channels []Channel) error {
	for _, c := range channels {
		if err := c.Policy.Validate(); err != nil {
			return fmt.Errorf("channels.%s.%w", c.Name, err)
		}
		policy, err := json.Marshal(c.Policy)
		if err != nil {
			return err
		}
		max := c.MaxPayload
		if max == 0 {
			max = 64 << 10
		}
		if _, err := pool.Exec(ctx, query.Register, c.Name, c.Kind, policy, max); err != nil {
			return fmt.Errorf("dispatcher.Register(%q): %w", c.Name, err)
		}
	}
	return nil
}

// channel is a Channel at run time: its effective policy, pause flag, limiter
// and in-flight count, refreshed from the database.
type channel struct {
	Channel
	policy   atomic.Pointer[Policy]
	paused   atomic.Bool
	inflight atomic.Int64
	limiter  *rate.Limiter
	keyed    bool
	looker   Looker
}

func newChannel(c Channel) *channel {
	ch := &channel{Channel: c, limiter: rate.NewLimiter(rate.Inf, 0)}
	p := c.Policy
	ch.setPolicy(&p)
	if k, ok := c.Provider.(Keyed); ok && k.Idempotent() {
		ch.keyed = true
	}
	ch.looker, _ = c.Provider.(Looker)
	return ch
}

func (c *channel) setPolicy(p *Policy) {
	old := c.policy.Swap(p)
	if old != nil && old.RatePerSecond == p.RatePerSecond {
		return
	}
	if p.RatePerSecond <= 0 {
		c.limiter.SetLimit(rate.Inf)
		return
	}
	c.limiter.SetLimit(rate.Limit(p.RatePerSecond))
	c.limiter.SetBurst(int(math.Max(1, math.Ceil(p.RatePerSecond/10))))
}

// room is how many intents the channel may claim now, and how long to wait
// when the rate limit leaves none.
func (c *channel) room(batch int, now time.Time) (int, time.Duration) {
	p := c.policy.Load()
	n := min(p.Concurrency-int(c.inflight.Load()), batch)
	if n <= 0 || c.limiter.Limit() == rate.Inf {
		return max(n, 0), 0
	}
	tokens := int(c.limiter.TokensAt(now))
	if tokens <= 0 {
		return 0, time.Duration(float64(time.Second) / float64(c.limiter.Limit()))
	}
	return min(n, tokens), 0
}

// effectivePolicy is the provider's default, then the registered policy, then
// the admin API's override, each replacing the fields it names.
func effectivePolicy(kind string, registered, override []byte) (Policy, error) {
	p := DefaultPolicy(kind)
	var err error
	for _, layer := range [][]byte{registered, override} {
		if len(layer) == 0 || string(layer) == "{}" {
			continue
		}
		if p, err = p.Merge(layer); err != nil {
			return p, err
		}
	}
	return p, nil
}
