package dispatcher

import (
	"context"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// foldInterval is how often the deltas of the settled counts are folded.
// Readers add the deltas not folded yet, so it bounds their work, not their
// accuracy.
const foldInterval = 5 * time.Second

// folder folds the deltas that every change of a settled intent appends
// (migration 012's triggers on one node; in the distributed mode the
// statements that change intents) into the counts that GET /v1/stats, the channel pages and
// /metrics read, so those reads stay a few rows whatever history holds; and
// marks the ids handed out over time (id_marks), where a list from a time on
// starts.
type folder struct {
	loop
	d *Dispatcher
}

// Start folds every foldInterval until Stop.
func (f *folder) Start(ctx context.Context) { f.start(ctx, f.run) }

// Stop ends the loop and waits for a fold in progress.
func (f *folder) Stop() { f.stop() }

func (f *folder) run(ctx context.Context) {
	every(ctx, foldInterval, nil, func() {
		if err := f.fold(ctx); err != nil {
			f.d.logDB(ctx, "folding the settled counts", err)
		}
	})
}

// fold moves the deltas into the counts in one statement (instances folding at
// once each take distinct delta rows; in the distributed mode one folds while
// the others skip), then marks the last id handed out, which
// a list from a time on starts at, forgetting marks older than any channel
// keeps its rows.
func (f *folder) fold(ctx context.Context) error {
	if err := query.FoldSettledCounts(ctx, f.d.pool); err != nil {
		return err
	}
	var keep time.Duration
	for _, ch := range f.d.chans {
		keep = max(keep, ch.policy.Load().Retention.D())
	}
	keep += 24 * time.Hour
	return query.MarkIDs(ctx, f.d.pool, keep)
}
