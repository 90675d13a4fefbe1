package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/attemptdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage/citus"
	"github.com/effectd/effectd/internal/storage/internal/retention"
	"github.com/effectd/effectd/internal/storage/onenode"
)

// Runner runs fn on a connection the caller holds (the dispatcher's held
// connections); a store runs one statement per call of fn.
type Runner = func(ctx context.Context, fn func(db query.TxDB) error) error

// Engine is what the dispatcher's loops ask of storage: claiming, completing,
// settling expired leases, provider events and delivery polls, and retention.
// Rows carry their bucket (0 on one PostgreSQL); a method taking a bucket acts
// on that bucket's shard in the distributed mode.
type Engine interface {
	// Mode is the storage mode the store implements.
	Mode() effectdtype.Storage
	// Claim takes up to p.Limit due PENDING intents of p.Channel to SENDING
	// under a lease, skipping rows another transaction holds; avail is the
	// channel's rate tokens as the last claim saw them.
	Claim(ctx context.Context, run Runner, p intentdb.ClaimParams) (rows []intentdb.Claimed, avail float64, err error)
	// Complete writes a batch of outcomes of one bucket as fenced
	// compare-and-sets (intentdb.Complete) and returns the completions not applied.
	Complete(ctx context.Context, db query.TxDB, b *intentdb.CompleteBatch, recheck bool, bucket int64) ([]intentdb.Fenced, error)
	// TakeExpired takes up to n SENDING intents of channels whose lease
	// expired, extending their lease by lease.
	TakeExpired(ctx context.Context, run Runner, n int, channels []string, lease time.Duration) ([]intentdb.Unsettled, error)
	// Settle applies a settlement of an expired lease, fenced on the intent's
	// key, status and attempts (intentdb.Settle).
	Settle(ctx context.Context, db query.DB, s intentdb.SettleParams, bucket int64) (applied bool, err error)
	// EventIntent locks the intent a provider event is about (intentdb.EventIntent).
	EventIntent(ctx context.Context, tx pgx.Tx, channel string, o intentdb.EventObject) (intentdb.EventTarget, error)
	// SettleByEvent applies a provider event's settlement to in, fenced on its key.
	SettleByEvent(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, s intentdb.SettleByEventParams) (bool, error)
	// SetDelivery applies a provider event's delivery change to in.
	SetDelivery(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, c intentdb.DeliveryChange) (bool, error)
	// LockPolls says whether this instance may poll deliveries now, on conn;
	// unlock ends its turn.
	LockPolls(ctx context.Context, conn query.DB) (unlock func(), ok bool, err error)
	// PollDue lists up to limit intents of channel whose delivery poll is due.
	PollDue(ctx context.Context, db query.DB, channel string, delays []time.Duration, limit int) ([]intentdb.DuePoll, error)
	// RecordPoll records a delivery poll (intentdb.RecordPoll) and says whether
	// the delivery moved.
	RecordPoll(ctx context.Context, db query.DB, p intentdb.Poll, bucket int64) (moved bool, err error)
	// Prune deletes, batch rows at a time, the terminal intents of channel
	// last changed more than keep ago, and returns how many it deleted.
	Prune(ctx context.Context, db query.DB, channel string, keep time.Duration, batch int) (int64, error)
	// PruneDedupeKeys deletes the dedupe keys past their channel's horizon
	// whose intents partition is gone, and returns how many it deleted.
	PruneDedupeKeys(ctx context.Context, now time.Time) (int64, error)
	// DropExpiredPartitions drops the day partitions that ended more than
	// horizon ago and hold no live or recent intent, and returns those it
	// dropped and how many intents partitions it held.
	DropExpiredPartitions(ctx context.Context, horizon time.Duration) (dropped []retentiondb.Partition, held int, err error)
	// FinishDetaches finishes the detaches of partitions a drop left half way
	// (a crash, a lock not free in time), and attaches again the intents
	// partitions it detached without deciding on them: the prune's first
	// step. Both return retentiondb.ErrPartitionBusy when a lock was not free.
	FinishDetaches(ctx context.Context) error
	// FoldRollups adds the deltas of the minute rollups to the rollups the
	// console's charts read.
	FoldRollups(ctx context.Context, db query.TxDB) error
}

// Operator is what the operator service (the admin API, the console, the
// CLI) and the dispatcher's figures ask of storage: operators' transitions
// of an intent named by id, lists of intents, and counts and gauges.
type Operator interface {
	// Operate applies an operator's transition as a fenced compare-and-set
	// (intentdb.Operate); pgx.ErrNoRows when the fence held it back.
	Operate(ctx context.Context, db query.DB, t intentdb.Transition) (effectdtype.IntentRow, error)
	// RecordOperatorAttempt records an operator's transition as an attempt.
	RecordOperatorAttempt(ctx context.Context, db query.DB, a attemptdb.OperatorAttempt) error
	// SettleByID applies a settlement to an intent named by id alone, fenced
	// as Engine.Settle is.
	SettleByID(ctx context.Context, db query.DB, s intentdb.SettleParams) (applied bool, err error)
	// ListIntents reads up to f.Limit intents by id and hands each to yield
	// until it returns false (readdb.ListIntents).
	ListIntents(ctx context.Context, db query.DB, f effectdtype.IntentFilter, yield func(effectdtype.IntentRow) bool) error
	// ChannelCounts counts the intents of channel (nil: every registered
	// channel) by status.
	ChannelCounts(ctx context.Context, db query.DB, channel *string) ([]readdb.StatusCount, error)
	// Gauges reads every registered channel's gauges.
	Gauges(ctx context.Context, db query.DB) ([]effectdtype.ChannelGauges, error)
	// Figures reads what ChannelCounts (of every channel) and Gauges read.
	Figures(ctx context.Context, db query.DB) ([]readdb.StatusCount, []effectdtype.ChannelGauges, error)
	// FoldSettledCounts folds the deltas of the settled counts into the counts.
	FoldSettledCounts(ctx context.Context, db query.TxDB) error
	// ApplyBulk hands the frozen rows of a bulk snapshot to the caller's
	// appliers as the store groups them: each row to one, or (the distributed
	// mode) a bucket's rows a batch at a time to batch, the rows of a batch
	// that fails as a whole then to one, row by row. It stops at the first
	// error one returns, and when ctx ends.
	ApplyBulk(ctx context.Context, db query.DB, snapshot string, one func(intentdb.FrozenRow) error, batch func(bucket int64, rows []intentdb.FrozenRow) error) error
}

// Store is everything effectd asks of storage.
type Store interface {
	Engine
	Operator
}

// Leases are the distributed mode's buckets: how many there are, and the
// ones this instance serves now (nil when it serves none, as an operator's
// process).
type Leases struct {
	Buckets int
	Owned   func() []int
}

// New returns the store of mode on pool: the one place a mode picks an
// implementation.
func New(mode effectdtype.Storage, pool *pgxpool.Pool, l Leases) Store {
	if mode == effectdtype.Citus {
		return citus.New(pool, l.Buckets, l.Owned)
	}
	return onenode.New(pool)
}

// WithPartitionChecked returns ctx carrying f, which DropExpiredPartitions
// calls between the first check of a partition it drops one by one and its
// drop: a test's change in between.
func WithPartitionChecked(ctx context.Context, f func(retentiondb.Partition)) context.Context {
	return retention.WithPartitionChecked(ctx, f)
}
