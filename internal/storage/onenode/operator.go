package onenode

import (
	"context"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/attemptdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
)

// Operate applies t (intentdb.Operate).
func (s *Store) Operate(ctx context.Context, db query.DB, t intentdb.Transition) (effectdtype.IntentRow, error) {
	return intentdb.Operate(ctx, db, t)
}

// RecordOperatorAttempt records a (attemptdb.RecordOperatorAttempt).
func (s *Store) RecordOperatorAttempt(ctx context.Context, db query.DB, a attemptdb.OperatorAttempt) error {
	return attemptdb.RecordOperatorAttempt(ctx, db, a)
}

// SettleByID applies st (intentdb.Settle): the id names the row.
func (s *Store) SettleByID(ctx context.Context, db query.DB, st intentdb.SettleParams) (bool, error) {
	return intentdb.Settle(ctx, db, st)
}

// ListIntents reads the intents f selects (readdb.ListIntents).
func (s *Store) ListIntents(ctx context.Context, db query.DB, f effectdtype.IntentFilter, yield func(effectdtype.IntentRow) bool) error {
	return readdb.ListIntents(ctx, db, f, yield)
}

// ChannelCounts counts intents by status (readdb.ChannelCounts).
func (s *Store) ChannelCounts(ctx context.Context, db query.DB, channel *string) ([]readdb.StatusCount, error) {
	return readdb.ChannelCounts(ctx, db, channel)
}

// Gauges reads the channels' gauges (readdb.Gauges).
func (s *Store) Gauges(ctx context.Context, db query.DB) ([]effectdtype.ChannelGauges, error) {
	return readdb.Gauges(ctx, db)
}

// Figures reads the counts and the gauges, one after the other (readdb.Figures).
func (s *Store) Figures(ctx context.Context, db query.DB) ([]readdb.StatusCount, []effectdtype.ChannelGauges, error) {
	return readdb.Figures(ctx, db)
}

// FoldSettledCounts folds the settled counts' deltas (readdb.FoldSettledCounts).
func (s *Store) FoldSettledCounts(ctx context.Context, db query.TxDB) error {
	return readdb.FoldSettledCounts(ctx, db)
}

// ApplyBulk hands every frozen row of snapshot to one, row by row.
func (s *Store) ApplyBulk(ctx context.Context, db query.DB, snapshot string, one func(intentdb.FrozenRow) error, _ func(int64, []intentdb.FrozenRow) error) error {
	list, err := intentdb.BulkRows(ctx, db, snapshot)
	if err != nil {
		return err
	}
	for _, f := range list {
		if err := one(f); err != nil {
			return err
		}
	}
	return nil
}

// FoldRollups folds the rollups' deltas (readdb.FoldRollups).
func (s *Store) FoldRollups(ctx context.Context, db query.TxDB) error {
	return readdb.FoldRollups(ctx, db)
}
