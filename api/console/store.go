package console

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// store keeps scs sessions in effectd.console_sessions. (scs's own pgxstore
// reads an unqualified "sessions" table, which would land in the producer's
// schema; this one is the same three statements on effectd's own table.)
type store struct{ pool *pgxpool.Pool }

// FindCtx returns the data of an unexpired session.
func (s store) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM effectd.console_sessions WHERE token = $1 AND expiry > now()`, token).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// CommitCtx saves a session, and drops sessions that expired an hour ago.
func (s store) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	_, err := s.pool.Exec(ctx, `
WITH gone AS (DELETE FROM effectd.console_sessions WHERE expiry < now() - interval '1 hour')
INSERT INTO effectd.console_sessions (token, data, expiry) VALUES ($1, $2, $3)
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry`, token, b, expiry)
	return err
}

// DeleteCtx removes a session.
func (s store) DeleteCtx(ctx context.Context, token string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM effectd.console_sessions WHERE token = $1`, token)
	return err
}

// Find, Commit and Delete satisfy scs.Store; scs calls the Ctx forms.
func (s store) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}
func (s store) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}
func (s store) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }
