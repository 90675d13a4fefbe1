package accessdb

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
)

// effectd.console_sessions: the console's sessions (an scs store).

//go:embed session_find.sql
var sessionFindSQL string

//go:embed session_commit.sql
var sessionCommitSQL string

//go:embed session_delete.sql
var sessionDeleteSQL string

// FindSession reads the data of session token unless it has expired; found
// is false when there is no such session.
func FindSession(ctx context.Context, db query.DB, token string) (data []byte, found bool, err error) {
	err = db.QueryRow(ctx, sessionFindSQL, token).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// CommitSession saves session token with data until expiry, and drops the
// sessions that expired an hour ago.
func CommitSession(ctx context.Context, db query.DB, token string, data []byte, expiry time.Time) error {
	_, err := db.Exec(ctx, sessionCommitSQL, token, data, expiry)
	return err
}

// DeleteSession deletes session token.
func DeleteSession(ctx context.Context, db query.DB, token string) error {
	_, err := db.Exec(ctx, sessionDeleteSQL, token)
	return err
}
