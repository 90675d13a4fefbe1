package channeldb

import (
	"context"
	_ "embed"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// The rate tokens: each rate-limited channel's token bucket (the rate
// limiter's, not a distribution bucket), one row of effectd.rate_buckets
// shared by every instance, whose tokens Claim spends. The table keeps its
// first name: renaming it would break the claims of the instances of the
// previous version still running while an upgrade rolls out.

//go:embed rate_tokens_ensure.sql
var ensureRateTokensSQL string

//go:embed slow_down.sql
var slowDownSQL string

// EnsureRateTokens creates channel's shared rate tokens unless it has them.
func EnsureRateTokens(ctx context.Context, db query.DB, channel string) error {
	_, err := db.Exec(ctx, ensureRateTokensSQL, channel)
	return err
}

// SlowDown empties channel's shared rate tokens, refilling at rate tokens a
// second, so that no instance claims for about after: a provider's
// Retry-After.
func SlowDown(ctx context.Context, db query.DB, channel string, after time.Duration, rate float64) error {
	_, err := db.Exec(ctx, slowDownSQL, channel, after.Seconds(), rate)
	return err
}
