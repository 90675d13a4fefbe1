package query

import (
	"context"
	_ "embed"
	"time"
)

// effectd.rate_buckets: each rate-limited channel's token bucket, shared by
// every instance (Claim spends it).

//go:embed rate_bucket_ensure.sql
var ensureRateBucketSQL string

//go:embed slow_down.sql
var slowDownSQL string

// EnsureRateBucket creates channel's shared rate bucket unless it exists.
func EnsureRateBucket(ctx context.Context, db DB, channel string) error {
	_, err := db.Exec(ctx, ensureRateBucketSQL, channel)
	return err
}

// SlowDown empties channel's shared bucket, refilling at rate tokens a
// second, so that no instance claims for about after: a provider's
// Retry-After.
func SlowDown(ctx context.Context, db DB, channel string, after time.Duration, rate float64) error {
	_, err := db.Exec(ctx, slowDownSQL, channel, after.Seconds(), rate)
	return err
}
