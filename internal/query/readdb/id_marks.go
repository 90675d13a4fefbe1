package readdb

import (
	"context"
	_ "embed"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// effectd.id_marks: the last intent id handed out, marked over time, where a
// read of the intents created from a time on starts.

//go:embed mark_ids.sql
var markIDsSQL string

//go:embed id_before.sql
var idBeforeSQL string

// MarkIDs records the last intent id handed out now, unless none was drawn
// since the last mark, and forgets the marks older than keep.
func MarkIDs(ctx context.Context, db query.DB, keep time.Duration) error {
	_, err := db.Exec(ctx, markIDsSQL, query.Interval(keep))
	return err
}

// idBefore is the last id handed out before t, as marked: every intent created
// at or after t has a higher id. 0 when no mark is older.
func idBefore(ctx context.Context, db query.DB, t time.Time) (id int64, err error) {
	err = db.QueryRow(ctx, idBeforeSQL, t).Scan(&id)
	return id, err
}
