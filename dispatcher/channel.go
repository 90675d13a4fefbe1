package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/policy"
)

// Channel is a named destination bound to one provider and one policy.
type Channel struct {
	Name       string
	Kind       string // webhook | stripe | twilio
	Provider   Provider
	Policy     policy.Policy // from the configuration; the admin API's overrides apply on top
	MaxPayload int           // bytes; 0 means DefaultMaxPayload
	Redact     []string      // top-level payload fields that viewers and logs see as "***"
	Notify     *Notify       // nil: the producer is not told about outcomes
}

// Notify tells a channel's producer about its intents' outcomes: each listed
// outcome is enqueued, in the transaction that reaches it, as an intent on the
// webhook channel Channel (event id <idempotency_key>:<outcome>, payload
// {"type":"effect.<outcome>","intent":{…}}).
type Notify struct {
	Channel string   `json:"channel"`
	On      []string `json:"on"`
}

// NotifyOutcomes are the outcomes a Notify may list.
var NotifyOutcomes = []string{"sent", "failed", "in_doubt", "skipped", "cancelled", "delivered", "undelivered"}

// Validate returns an error naming the first invalid field.
func (n *Notify) Validate() error {
	if n.Channel == "" {
		return fmt.Errorf("notify.channel: is required")
	}
	if len(n.On) == 0 {
		return fmt.Errorf("notify.on: list at least one of %s", strings.Join(NotifyOutcomes, ", "))
	}
	for _, o := range n.On {
		if !slices.Contains(NotifyOutcomes, o) {
			return fmt.Errorf("notify.on: unknown outcome %q (want %s)", o, strings.Join(NotifyOutcomes, ", "))
		}
	}
	return nil
}

// DefaultMaxPayload is the payload size limit, in bytes, of a channel whose
// MaxPayload is 0 (the column's default in the schema too).
const DefaultMaxPayload = 64 << 10

// Register records channels in the database db (a pool, or a transaction
// the caller commits), so that effectd.enqueue accepts them and every
// instance sees their policy. Overrides made through the admin API are kept.
func Register(ctx context.Context, db query.DB, channels []Channel) error {
	for _, c := range channels {
		if err := c.Policy.ValidateFor(c.Kind); err != nil {
			return fmt.Errorf("channels.%s.%w", c.Name, err)
		}
		registered, err := json.Marshal(c.Policy)
		if err != nil {
			return err
		}
		max := cmp.Or(c.MaxPayload, DefaultMaxPayload)
		var notify []byte
		if c.Notify != nil {
			if err := c.Notify.Validate(); err != nil {
				return fmt.Errorf("channels.%s.%w", c.Name, err)
			}
			if notify, err = json.Marshal(c.Notify); err != nil {
				return err
			}
		}
		if err := channeldb.Register(ctx, db, channeldb.Registration{Name: c.Name, Provider: c.Kind, Policy: registered,
			MaxPayload: max, Notify: notify}); err != nil {
			return fmt.Errorf("dispatcher.Register(%q): %w", c.Name, err)
		}
		if err := channeldb.SetRedact(ctx, db, c.Name, c.Redact); err != nil {
			return fmt.Errorf("dispatcher.Register(%q): %w", c.Name, err)
		}
		if err := channeldb.EnsureRateTokens(ctx, db, c.Name); err != nil {
			return fmt.Errorf("dispatcher.Register(%q): %w", c.Name, err)
		}
	}
	if err := channeldb.AnalyzeSmallTables(ctx, db); err != nil {
		return fmt.Errorf("dispatcher.Register: %w", err)
	}
	return nil
}

// channel is a Channel at run time: its effective policy, pause flag and
// in-flight count, refreshed from the database.
type channel struct {
	Channel
	policy    atomic.Pointer[policy.Policy]
	paused    atomic.Bool
	inflight  atomic.Int64
	coolUntil atomic.Int64 // unix nanoseconds: a provider asked us to slow down
	keyed     bool
	notifies  bool // another channel's Notify names it: its intents are notifications
	looker    Looker
	poller    Poller
}

func newChannel(c Channel) *channel {
	ch := &channel{Channel: c}
	p := c.Policy
	ch.policy.Store(&p)
	if k, ok := c.Provider.(Keyed); ok && k.Idempotent() {
		ch.keyed = true
	}
	ch.looker, _ = c.Provider.(Looker)
	ch.poller, _ = c.Provider.(Poller)
	return ch
}

// room is how many intents the channel may claim now by its concurrency, and
// how long to wait while a provider's Retry-After cools it down.
func (c *channel) room(batch int, now time.Time) (int, time.Duration) {
	if wait := time.Duration(c.coolUntil.Load() - now.UnixNano()); wait > 0 {
		return 0, wait
	}
	p := c.policy.Load()
	return max(min(p.Concurrency-int(c.inflight.Load()), batch), 0), 0
}

// burst is how many tokens a rate-limited channel may save up: a tenth of a
// second's worth, at least one.
func burst(perSecond float64) float64 { return math.Max(1, perSecond/10) }
