package console

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query"
)

// store keeps scs sessions in effectd.console_sessions. (scs's own pgxstore
// reads an unqualified "sessions" table, which would land in the producer's
// schema; this one is the same three statements on effectd's own table, in
// internal/query.)
type store struct{ pool *pgxpool.Pool }

// FindCtx returns the data of an unexpired session.
func (s store) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	return query.FindSession(ctx, s.pool, token)
}

// CommitCtx saves a session, and drops sessions that expired an hour ago.
func (s store) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	return query.CommitSession(ctx, s.pool, token, b, expiry)
}

// DeleteCtx removes a session.
func (s store) DeleteCtx(ctx context.Context, token string) error {
	return query.DeleteSession(ctx, s.pool, token)
}

// Find, Commit and Delete satisfy scs.Store; scs calls the Ctx forms.
func (s store) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}
func (s store) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}
func (s store) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }
