package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"

	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage"
)

// SetBeforeCall makes every worker run f between taking a claimed intent and
// calling its provider. Call it before Start.
func SetBeforeCall(d *Dispatcher, f func(id int64, attempt int32)) { d.workers.beforeCall = f }

// Prune runs d's pruner once now and returns how many intents it deleted.
func Prune(ctx context.Context, d *Dispatcher) (int64, error) { return d.pruner.prune(ctx) }

// PollDeliveries runs d's delivery poller once now and returns how many
// intents it polled.
func PollDeliveries(ctx context.Context, d *Dispatcher) (int, error) {
	return d.poller.pollDeliveries(ctx)
}

// Fenced returns how many outcomes of channel were fenced out.
func Fenced(d *Dispatcher, channel string) float64 {
	var m dto.Metric
	d.m.fenced.WithLabelValues(channel).Write(&m)
	return m.GetCounter().GetValue()
}

// Paused reports whether the dispatcher has seen channel paused.
func Paused(d *Dispatcher, channel string) bool { return d.byName[channel].paused.Load() }

// Orphans returns effectd_orphan_events_total for channel.
func Orphans(d *Dispatcher, channel string) float64 {
	var m dto.Metric
	d.m.orphans.WithLabelValues(channel).Write(&m)
	return m.GetCounter().GetValue()
}

// ConfigOf returns d's Config with its defaults applied.
func ConfigOf(d *Dispatcher) Config { return d.cfg }

// Lookups returns effectd_lookups_total for channel and outcome.
func Lookups(d *Dispatcher, channel, outcome string) float64 {
	var m dto.Metric
	d.m.lookups.WithLabelValues(channel, outcome).Write(&m)
	return m.GetCounter().GetValue()
}

// BucketLeases exposes the lease manager of the distributed mode to tests,
// which run its rounds themselves under a clock they move.
type BucketLeases = bucketLeases

func NewBucketLeases(pool *pgxpool.Pool, buckets int, ttl time.Duration, clock func() time.Time) *BucketLeases {
	return newBucketLeases(pool, buckets, ttl, clock, nil)
}

func (b *bucketLeases) Rebalance(ctx context.Context) error { return b.rebalance(ctx) }
func (b *bucketLeases) Release(ctx context.Context) error {
	return intentdb.ReleaseBuckets(ctx, b.pool, b.id, nil, true)
}
func (b *bucketLeases) Takeovers() float64 {
	var m dto.Metric
	b.takeovers.Write(&m)
	return m.GetCounter().GetValue()
}
func (b *bucketLeases) Gauge() float64 {
	var m dto.Metric
	b.gauge.Write(&m)
	return m.GetGauge().GetValue()
}

// OwnedBuckets returns the buckets d serves (distributed mode), nil otherwise.
func OwnedBuckets(d *Dispatcher) []int {
	if d.buckets == nil {
		return nil
	}
	return d.buckets.Owned()
}

// HeldSetting opens the pool a dispatcher with c holds its connections from,
// as Start does, and returns the setting name on one of its connections.
func HeldSetting(ctx context.Context, pool *pgxpool.Pool, c Config, name string) (string, error) {
	held, err := openHeld(ctx, pool, c)
	if err != nil {
		return "", err
	}
	defer held.Close()
	var v string
	err = held.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// HeldPool opens the pool a dispatcher with c holds its connections from, as
// Start does.
func HeldPool(ctx context.Context, pool *pgxpool.Pool, c Config) (*pgxpool.Pool, error) {
	return openHeld(ctx, pool, c)
}

// WithPartitionChecked returns ctx carrying f, which DropExpiredPartitions
// calls between the first check of a partition it drops one by one and the
// drop.
func WithPartitionChecked(ctx context.Context, f func(retentiondb.Partition)) context.Context {
	return storage.WithPartitionChecked(ctx, f)
}
