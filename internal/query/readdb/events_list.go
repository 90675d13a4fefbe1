package readdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed list_events.sql
var listEventsSQL string

// ListEvents reads up to f.Limit provider events by id.
func ListEvents(ctx context.Context, db query.DB, f effectdtype.EventFilter) ([]effectdtype.ProviderEvent, error) {
	sql, args := eventsStatement(f)
	rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.ProviderEvent])
}

// eventsStatement builds ListEvents's statement and its arguments.
func eventsStatement(f effectdtype.EventFilter) (string, []any) {
	s := query.NewStmt(listEventsSQL, f.After, f.Limit)
	if f.OrphansOnly {
		s.And("intent_id IS NULL")
	}
	if f.Channel != nil {
		s.And("channel = %s", *f.Channel)
	}
	if f.IntentID != nil {
		s.And("intent_id = %s", *f.IntentID)
	}
	if f.Channels != nil {
		s.And("channel = ANY (%s::text[])", f.Channels)
	}
	s.Raw("ORDER BY id\nLIMIT $2")
	return s.SQL(), s.Args
}
