package dispatcher

import (
	"context"
	"time"
)

// pruneDedupeKeys deletes the dedupe keys past their channel's horizon
// (storage.Engine.PruneDedupeKeys), counting what it deleted in
// effectd_dedupe_keys_pruned_total.
func (pr *pruner) pruneDedupeKeys(ctx context.Context) error {
	n, err := pr.d.store.PruneDedupeKeys(ctx, time.Now())
	pr.d.m.dedupeKeysPruned.Add(float64(n))
	return err
}
