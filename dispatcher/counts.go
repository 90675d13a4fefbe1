package dispatcher

import (
	"context"
	"time"

	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/statemachine"
)

// foldInterval is how often the deltas of the settled counts are folded.
// Readers add the deltas not folded yet, so it bounds their work, not their
// accuracy.
const foldInterval = 5 * time.Second

// rollupKeep is how long the minute rollups are kept: the longest chart
// range (the operator service's Charts) and a day.
const rollupKeep = 8 * 24 * time.Hour

// foldLoop folds the deltas that every change of a settled intent appends
// (migration 012's triggers on one node; in the distributed mode the
// statements that change intents) into the counts that GET /v1/stats, the channel pages and
// /metrics read, so those reads stay a few rows whatever history holds; and
// marks the ids handed out over time (id_marks), where a list from a time on
// starts.
type foldLoop struct {
	loop
	d          *Dispatcher
	sampledMin time.Time // the minute the backlog was last sampled in
}

// Start folds every foldInterval until Stop.
func (f *foldLoop) Start(ctx context.Context) { f.start(ctx, f.run) }

// Stop ends the loop and waits for a fold in progress.
func (f *foldLoop) Stop() { f.stop() }

func (f *foldLoop) run(ctx context.Context) {
	every(ctx, foldInterval, nil, func() {
		if err := f.fold(ctx); err != nil {
			f.d.logDB(ctx, "folding the settled counts", err)
		}
		if err := f.roll(ctx); err != nil {
			f.d.logDB(ctx, "folding the minute rollups", err)
		}
	})
}

// fold moves the deltas into the counts in one statement (instances folding at
// once each take distinct delta rows; in the distributed mode one folds while
// the others skip), then marks the last id handed out, which
// a list from a time on starts at, forgetting marks older than any channel
// keeps its rows.
func (f *foldLoop) fold(ctx context.Context) error {
	if err := f.d.store.FoldSettledCounts(ctx, f.d.pool); err != nil {
		return err
	}
	var keep time.Duration
	for _, ch := range f.d.chans {
		keep = max(keep, ch.policy.Load().Retention.D())
	}
	keep += 24 * time.Hour
	return readdb.MarkIDs(ctx, f.d.pool, keep)
}

// roll adds the rollup deltas to the minute rollups the console's charts
// read and, once a minute, samples every channel's backlog and oldest due
// age into them and forgets the rollups older than rollupKeep.
func (f *foldLoop) roll(ctx context.Context) error {
	if err := f.d.store.FoldRollups(ctx, f.d.pool); err != nil {
		return err
	}
	now := time.Now()
	minute := now.Truncate(time.Minute)
	if !minute.After(f.sampledMin) {
		return nil
	}
	f.sampledMin = minute
	statusCounts, gauges, err := f.d.store.Figures(ctx, f.d.pool)
	if err != nil {
		return err
	}
	samples := make([]readdb.BacklogSample, len(gauges))
	for i, g := range gauges {
		samples[i] = readdb.BacklogSample{Channel: g.Channel, OldestDueSeconds: g.OldestPendingAge}
		for _, c := range statusCounts {
			if c.Channel == g.Channel && c.Status == statemachine.Pending {
				samples[i].Backlog = c.N
			}
		}
	}
	if err := readdb.SampleBacklog(ctx, f.d.pool, samples); err != nil {
		return err
	}
	return readdb.PruneRollups(ctx, f.d.pool, now.Add(-rollupKeep))
}
