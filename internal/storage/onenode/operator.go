package onenode

import (
	"context"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// Operate applies t (query.Operate).
func (s *Store) Operate(ctx context.Context, db query.DB, t query.Transition) (effectdtype.IntentRow, error) {
	return query.Operate(ctx, db, t)
}

// RecordOperatorAttempt records a (query.RecordOperatorAttempt).
func (s *Store) RecordOperatorAttempt(ctx context.Context, db query.DB, a query.OperatorAttempt) error {
	return query.RecordOperatorAttempt(ctx, db, a)
}

// SettleByID applies st (query.Settle): the id names the row.
func (s *Store) SettleByID(ctx context.Context, db query.DB, st query.SettleParams) (bool, error) {
	return query.Settle(ctx, db, st)
}

// ListIntents reads the intents f selects (query.ListIntents).
func (s *Store) ListIntents(ctx context.Context, db query.DB, f query.IntentFilter, yield func(effectdtype.IntentRow) bool) error {
	return query.ListIntents(ctx, db, f, yield)
}

// ChannelCounts counts intents by status (query.ChannelCounts).
func (s *Store) ChannelCounts(ctx context.Context, db query.DB, channel *string) ([]query.StatusCount, error) {
	return query.ChannelCounts(ctx, db, channel)
}

// Gauges reads the channels' gauges (query.Gauges).
func (s *Store) Gauges(ctx context.Context, db query.DB) ([]query.ChannelGauges, error) {
	return query.Gauges(ctx, db)
}

// Figures reads the counts and the gauges, one after the other (query.Figures).
func (s *Store) Figures(ctx context.Context, db query.DB) ([]query.StatusCount, []query.ChannelGauges, error) {
	return query.Figures(ctx, db)
}

// FoldSettledCounts folds the settled counts' deltas (query.FoldSettledCounts).
func (s *Store) FoldSettledCounts(ctx context.Context, db query.TxDB) error {
	return query.FoldSettledCounts(ctx, db)
}

// ApplyBulk hands every frozen row of snapshot to one, row by row.
func (s *Store) ApplyBulk(ctx context.Context, db query.DB, snapshot string, one func(query.FrozenRow) error, _ func(int64, []query.FrozenRow) error) error {
	list, err := query.BulkRows(ctx, db, snapshot)
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

// FoldRollups folds the rollups' deltas (query.FoldRollups).
func (s *Store) FoldRollups(ctx context.Context, db query.TxDB) error {
	return query.FoldRollups(ctx, db)
}
