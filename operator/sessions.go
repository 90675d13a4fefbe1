package operator

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query/accessdb"
)

// Sessions keeps the console's login sessions in effectd.console_sessions,
// with the methods of scs's CtxStore (the console adds the context-free
// forms). scs's own pgxstore reads an unqualified "sessions" table, which
// would land in the producer's schema.
type Sessions struct{ Pool *pgxpool.Pool }

// FindCtx returns the data of an unexpired session.
func (s Sessions) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	return accessdb.FindSession(ctx, s.Pool, token)
}

// CommitCtx saves a session, and drops sessions that expired an hour ago.
func (s Sessions) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	return accessdb.CommitSession(ctx, s.Pool, token, b, expiry)
}

// DeleteCtx removes a session.
func (s Sessions) DeleteCtx(ctx context.Context, token string) error {
	return accessdb.DeleteSession(ctx, s.Pool, token)
}
