package intentdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
)

// Bucket leases divide the buckets of the distributed mode among the serve
// instances (dispatcher.bucketLeases). Every statement takes the time as
// now: nil means the database's clock (production), a time the caller's
// (tests that move time on without waiting).

//go:embed bucket_heartbeat.sql
var bucketHeartbeatSQL string

//go:embed bucket_renew.sql
var bucketRenewSQL string

//go:embed bucket_take.sql
var bucketTakeSQL string

//go:embed bucket_release.sql
var bucketReleaseSQL string

// BucketHeartbeat records instance id alive for ttl from now, makes the lease
// rows of buckets 0..buckets-1, and returns the live instances in id order.
func BucketHeartbeat(ctx context.Context, db query.DB, id string, now *time.Time, ttl time.Duration, buckets int) ([]string, error) {
	rows, _ := db.Query(ctx, bucketHeartbeatSQL, id, now, ttl, buckets)
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RenewBuckets extends for ttl from now the unexpired leases id holds on
// buckets below buckets and returns those buckets.
func RenewBuckets(ctx context.Context, db query.DB, id string, now *time.Time, ttl time.Duration, buckets int) ([]int, error) {
	rows, _ := db.Query(ctx, bucketRenewSQL, id, now, ttl, buckets)
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// TakenBucket is a bucket TakeBuckets took, and the instance whose expired
// lease it took over ("" when it was free).
type TakenBucket struct {
	Bucket int    `db:"bucket"`
	From   string `db:"was"`
}

// TakeBuckets takes for id, for ttl from now, up to n buckets below buckets
// that are free or whose lease has expired.
func TakeBuckets(ctx context.Context, db query.DB, id string, now *time.Time, ttl time.Duration, buckets, n int) ([]TakenBucket, error) {
	rows, _ := db.Query(ctx, bucketTakeSQL, id, now, ttl, buckets, n)
	return pgx.CollectRows(rows, pgx.RowToStructByName[TakenBucket])
}

// ReleaseBuckets gives up id's leases of the buckets listed (every one of
// id's leases when buckets is nil) and, when leaving, id's heartbeat.
func ReleaseBuckets(ctx context.Context, db query.DB, id string, buckets []int, leaving bool) error {
	var arg any
	if buckets != nil {
		arg = buckets
	}
	_, err := db.Exec(ctx, bucketReleaseSQL, id, arg, leaving)
	return err
}
