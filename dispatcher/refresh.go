package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/policy"
)

// refresher rereads every channel's effective policy and pause flag each
// interval, so that an override made through the admin API on any instance
// reaches this one.
type refresher struct {
	loop
	d        *Dispatcher
	interval time.Duration
}

// Start rereads the channels every interval until Stop.
func (r *refresher) Start(ctx context.Context) { r.start(ctx, r.run) }

// Stop ends the loop and waits for it.
func (r *refresher) Stop() { r.stop() }

func (r *refresher) run(ctx context.Context) {
	every(ctx, r.interval, nil, func() {
		if err := r.refresh(ctx); err != nil {
			r.d.logDB(ctx, "refreshing channel policies", err)
		}
	})
}

// refresh rereads every channel's policy and pause flag.
func (r *refresher) refresh(ctx context.Context) error {
	d := r.d
	rows, err := channeldb.ChannelPolicies(ctx, d.pool)
	if err != nil {
		return fmt.Errorf("read channels: %w", err)
	}
	seen := map[string]bool{}
	for _, row := range rows {
		name, paused := row.Name, row.Paused
		ch := d.byName[name]
		if ch == nil {
			continue
		}
		seen[name] = true
		p, err := policy.Effective(ch.Kind, row.Policy, row.PolicyOverride)
		if err != nil {
			d.log.Warn("ignoring invalid stored policy; keeping the previous one", "channel", name, "error", err)
		} else if *ch.policy.Load() != p {
			ch.policy.Store(&p)
			d.log.Info("channel policy changed", "channel", name)
		}
		if ch.paused.Swap(paused) != paused {
			d.log.Info("channel pause changed", "channel", name, "paused", paused)
			if !paused {
				poke(d.wake)
			}
		}
	}
	for _, n := range d.names {
		if !seen[n] {
			return fmt.Errorf("channel %q is not registered in the database: run effectd migrate --config", n)
		}
	}
	return nil
}
