package dispatcher

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// ChannelGauges are one channel's gauges.
type ChannelGauges = query.ChannelGauges

// Gauges reads every channel's gauges, by channel name, without reading history.
func Gauges(ctx context.Context, pool *pgxpool.Pool) ([]ChannelGauges, error) {
	return query.Gauges(ctx, pool)
}

// Stats returns the counts by status and the gauges of every channel that
// sees admits (nil: every channel), and their totals. The counts and the
// gauges are read at once, each on a connection of pool: in the distributed
// mode each is a round of tasks over every shard, and the two rounds overlap.
func Stats(ctx context.Context, pool *pgxpool.Pool, sees func(channel string) bool) (effectdtype.Stats, error) {
	var counts map[string]map[statemachine.State]int64
	var gauges []ChannelGauges
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if counts, err = channelCounts(gctx, pool, ""); err != nil {
			return fmt.Errorf("stats: counts: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) {
		if gauges, err = Gauges(gctx, pool); err != nil {
			return fmt.Errorf("stats: gauges: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return effectdtype.Stats{}, err
	}
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
