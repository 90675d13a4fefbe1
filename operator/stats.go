package operator

import (
	"context"
	"fmt"

	"github.com/effectd/effectd/effectdtype"
)

// Gauges reads every channel's gauges, by channel name, without reading history.
func (svc *Service) Gauges(ctx context.Context) ([]effectdtype.ChannelGauges, error) {
	return svc.store.Gauges(ctx, svc.pool)
}

// Stats returns the counts by status and the gauges of every channel that
// sees admits (nil: every channel), and their totals, read together
// (readdb.Figures: in the distributed mode one round of tasks over the shards).
func (svc *Service) Stats(ctx context.Context, sees func(channel string) bool) (effectdtype.Stats, error) {
	statusCounts, gauges, err := svc.store.Figures(ctx, svc.pool)
	if err != nil {
		return effectdtype.Stats{}, fmt.Errorf("stats: %w", err)
	}
	counts := countsByChannel(statusCounts)
	out := effectdtype.Stats{Channels: map[string]effectdtype.ChannelStats{},
		Totals: effectdtype.ChannelStats{Counts: zeroCounts(), CountsKind: effectdtype.CountsExact}}
	t := &out.Totals
	for _, g := range gauges {
		if sees != nil && !sees(g.Channel) {
			continue
		}
		cs := effectdtype.ChannelStats{Counts: counts[g.Channel], CountsKind: effectdtype.CountsExact, Gauges: g.Gauges}
		if cs.Counts == nil {
			cs.Counts = zeroCounts()
		}
		out.Channels[g.Channel] = cs
		for s, n := range cs.Counts {
			t.Counts[s] += n
		}
		t.OldestPendingAge = max(t.OldestPendingAge, g.OldestPendingAge)
		t.SendingPastLease += g.SendingPastLease
		t.InDoubt += g.InDoubt
		t.Deliveries.Accepted += g.Deliveries.Accepted
		t.Deliveries.Delivered += g.Deliveries.Delivered
		t.Deliveries.Undelivered += g.Deliveries.Undelivered
	}
	return out, nil
}
