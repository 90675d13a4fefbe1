package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/internal/query/intentdb"
)

// DefaultBucketLease is how long an instance holds its buckets without
// renewing them [Config.BucketLease]: the longest a dead instance's buckets
// wait before another instance serves them. Leases are renewed every third
// of it.
const DefaultBucketLease = 15 * time.Second

// bucketLeases divides the buckets of the distributed mode among the live
// serve instances (docs/scale.md, "Buckets"). Each round it records this
// instance's heartbeat, renews the leases it holds, and then gives up or
// takes buckets until it holds its fair share: with n live instances in id
// order, the instance of rank r holds buckets/n, one more when r <
// buckets%n. A joining instance thus gets its share once the others have seen
// its heartbeat and given theirs up; a dead instance's buckets are taken over
// once their leases expire. A bucket has one owner at a time in the lease
// table (intentdb.TakeBuckets); correctness of sending never rests on it (every
// claim still takes rows with FOR UPDATE SKIP LOCKED under a per-row lease),
// only the division of work.
type bucketLeases struct {
	loop
	pool    *pgxpool.Pool
	id      string
	buckets int
	ttl     time.Duration
	clock   func() time.Time // nil: the database's clock
	log     func(ctx context.Context, op string, err error, args ...any)

	mu    sync.Mutex
	owned []int     // sorted
	until time.Time // local clock: the leases are surely held until then

	gauge     prometheus.Gauge
	takeovers prometheus.Counter
}

func newBucketLeases(pool *pgxpool.Pool, buckets int, ttl time.Duration, clock func() time.Time, reg prometheus.Registerer) *bucketLeases {
	b := &bucketLeases{
		pool: pool, id: newInstanceID(), buckets: buckets, ttl: ttl, clock: clock,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "effectd_buckets_owned", Help: "Buckets of the distributed mode (database.citus) this instance holds the lease of and serves.",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "effectd_bucket_takeovers_total", Help: "Buckets this instance took over from another instance whose lease had expired (that instance died or stalled).",
		}),
	}
	if reg != nil {
		reg.MustRegister(b.gauge, b.takeovers)
	}
	return b
}

// newInstanceID names this serve instance in the lease tables.
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start divides the buckets until Stop, one round every third of the lease.
func (b *bucketLeases) Start(ctx context.Context) {
	b.start(ctx, func(ctx context.Context) {
		b.round(ctx)
		every(ctx, b.ttl/3, nil, func() { b.round(ctx) })
	})
}

// Stop ends the rounds and gives up this instance's buckets and heartbeat, so
// that the other instances take them at once.
func (b *bucketLeases) Stop() {
	b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), b.ttl)
	defer cancel()
	if err := intentdb.ReleaseBuckets(ctx, b.pool, b.id, nil, true); err != nil && b.log != nil {
		b.log(ctx, "giving up bucket leases", err)
	}
	b.set(nil, time.Time{})
}

// Owned returns the buckets this instance serves now, in order: none once
// its leases may have run out unrenewed.
func (b *bucketLeases) Owned() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.now().After(b.until) {
		return nil
	}
	return slices.Clone(b.owned)
}

func (b *bucketLeases) now() time.Time {
	if b.clock != nil {
		return b.clock()
	}
	return time.Now()
}

func (b *bucketLeases) set(owned []int, until time.Time) {
	slices.Sort(owned)
	b.mu.Lock()
	b.owned, b.until = owned, until
	b.mu.Unlock()
	b.gauge.Set(float64(len(owned)))
}

// round is one heartbeat, renewal and rebalance; a failed round logs and
// leaves the leases to the next one (or to their expiry).
func (b *bucketLeases) round(ctx context.Context) {
	if err := b.rebalance(ctx); err != nil && b.log != nil {
		b.log(ctx, "renewing bucket leases", err)
	}
}

// rebalance runs one round. The local deadline is taken before the first
// statement, so it never outlasts the leases the database records.
func (b *bucketLeases) rebalance(ctx context.Context) error {
	start := b.now()
	var at *time.Time
	if b.clock != nil {
		at = &start
	}
	live, err := intentdb.BucketHeartbeat(ctx, b.pool, b.id, at, b.ttl, b.buckets)
	if err != nil {
		return err
	}
	owned, err := intentdb.RenewBuckets(ctx, b.pool, b.id, at, b.ttl, b.buckets)
	if err != nil {
		return err
	}
	until := start.Add(b.ttl)
	b.set(slices.Clone(owned), until)
	want := fairShare(b.buckets, live, b.id)
	switch {
	case len(owned) > want:
		slices.Sort(owned)
		keep, extra := owned[:want], owned[want:]
		b.set(slices.Clone(keep), until) // stop serving them first
		if err := intentdb.ReleaseBuckets(ctx, b.pool, b.id, extra, false); err != nil {
			return err
		}
		owned = keep
	case len(owned) < want:
		taken, err := intentdb.TakeBuckets(ctx, b.pool, b.id, at, b.ttl, b.buckets, want-len(owned))
		if err != nil {
			return err
		}
		for _, t := range taken {
			owned = append(owned, t.Bucket)
			if t.From != "" && t.From != b.id {
				b.takeovers.Inc()
			}
		}
	}
	b.set(owned, until)
	return nil
}

// fairShare is how many of buckets the instance id holds among the live
// instances (sorted): buckets/n each, and one more for the first buckets%n.
func fairShare(buckets int, live []string, id string) int {
	r, found := slices.BinarySearch(live, id)
	if !found || len(live) == 0 {
		return 0
	}
	n := buckets / len(live)
	if r < buckets%len(live) {
		n++
	}
	return n
}
