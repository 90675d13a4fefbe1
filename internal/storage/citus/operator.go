package citus

import (
	"context"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/attemptdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
)

// Operate applies t on its intent's shard (intentdb.OperateBucket).
func (s *Store) Operate(ctx context.Context, db query.DB, t intentdb.Transition) (effectdtype.IntentRow, error) {
	return intentdb.OperateBucket(ctx, db, t)
}

// RecordOperatorAttempt reads the intent's bucket, then records a on its
// shard (attemptdb.RecordOperatorAttemptBucket).
func (s *Store) RecordOperatorAttempt(ctx context.Context, db query.DB, a attemptdb.OperatorAttempt) error {
	bucket, err := intentdb.IntentBucket(ctx, db, a.IntentID)
	if err != nil {
		return err
	}
	return attemptdb.RecordOperatorAttemptBucket(ctx, db, a, bucket)
}

// SettleByID reads the intent's bucket, then applies st on its shard
// (intentdb.SettleByIDBucket).
func (s *Store) SettleByID(ctx context.Context, db query.DB, st intentdb.SettleParams) (bool, error) {
	return intentdb.SettleByIDBucket(ctx, db, st)
}

// ListIntents reads the intents f selects, its scope read once on each shard
// (readdb.ListIntentsScopeAtOnce).
func (s *Store) ListIntents(ctx context.Context, db query.DB, f effectdtype.IntentFilter, yield func(effectdtype.IntentRow) bool) error {
	return readdb.ListIntentsScopeAtOnce(ctx, db, f, yield)
}

// ChannelCounts counts intents by status (readdb.ChannelCountsBucket).
func (s *Store) ChannelCounts(ctx context.Context, db query.DB, channel *string) ([]readdb.StatusCount, error) {
	return readdb.ChannelCountsBucket(ctx, db, channel)
}

// Gauges reads the channels' gauges (readdb.GaugesBucket).
func (s *Store) Gauges(ctx context.Context, db query.DB) ([]effectdtype.ChannelGauges, error) {
	return readdb.GaugesBucket(ctx, db)
}

// Figures reads the counts and the gauges in one round of tasks over the
// shards (readdb.FiguresBucket).
func (s *Store) Figures(ctx context.Context, db query.DB) ([]readdb.StatusCount, []effectdtype.ChannelGauges, error) {
	return readdb.FiguresBucket(ctx, db)
}

// FoldSettledCounts folds the settled counts' deltas while no other
// instance does (readdb.FoldSettledCountsBucket).
func (s *Store) FoldSettledCounts(ctx context.Context, db query.TxDB) error {
	return readdb.FoldSettledCountsBucket(ctx, db)
}

// FoldRollups folds the rollups' deltas while no other instance does
// (readdb.FoldRollupsBucket).
func (s *Store) FoldRollups(ctx context.Context, db query.TxDB) error {
	return readdb.FoldRollupsBucket(ctx, db)
}
