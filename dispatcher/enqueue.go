package dispatcher

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/internal/query/intentdb"
)

// Intent is an effect to send once per (EventID, Channel).
type Intent struct {
	EventID     string    // the producer's event id: the deduplication key
	Channel     string    // a channel registered from the configuration
	Payload     any       // a JSON object: json.RawMessage, []byte, or a value to marshal
	OccurredAt  time.Time // optional: refused when older than the channel's retention
	NotBefore   time.Time // optional: do not send before this time
	OrderingKey string    // optional
}

// Tx is the part of a transaction Enqueue needs. pgx.Tx satisfies it; wrap a
// *sql.Tx with SQLTx.
type Tx interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SQLTx adapts a database/sql transaction (opened with the pgx stdlib driver or
// any PostgreSQL driver that takes $n placeholders) to Tx.
type SQLTx struct{ *sql.Tx }

// QueryRow runs a query that returns one row.
func (t SQLTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRowContext(ctx, sql, args...)
}

// InputError is an intent refused by effectd.enqueue (SQLSTATE 22023): nothing was inserted.
type InputError struct {
	Field   string // event_id, channel, payload, payload.amount, occurred_at, ...
	Message string
	err     error
}

func (e *InputError) Error() string { return e.Message }

// Unwrap returns the database error.
func (e *InputError) Unwrap() error { return e.err }

// Enqueue records in inside tx, the producer's own transaction. It returns true
// when the intent is new and false for a duplicate (EventID, Channel), which
// changes nothing. Committing tx makes the intent visible to dispatchers; rolling
// it back leaves nothing. Bad input returns an *InputError naming the field.
// The span in ctx, if any, is the intent's producer span: the intent keeps
// its trace context and each attempt is traced in its trace (docs/tracing.md).
func Enqueue(ctx context.Context, tx Tx, in Intent) (inserted bool, err error) {
	if field, msg := checkIntent(in); field != "" {
		return false, &InputError{Field: field, Message: msg}
	}
	payload, err := encodePayload(in.Payload)
	if err != nil {
		return false, &InputError{Field: "payload", Message: "effectd.enqueue: payload: " + err.Error(), err: err}
	}
	inserted, err = intentdb.Enqueue(ctx, tx, intentdb.NewIntent{EventID: in.EventID, Channel: in.Channel, Payload: payload,
		OccurredAt: nullTime(in.OccurredAt), NotBefore: nullTime(in.NotBefore), OrderingKey: nullString(in.OrderingKey),
		Traceparent: traceparentOf(ctx)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22023" {
		return false, &InputError{Field: pgErr.ColumnName, Message: pgErr.Message, err: err}
	}
	if errors.As(err, &pgErr) && payloadCastErrors[pgErr.Code] {
		return false, &InputError{Field: "payload", Message: "effectd.enqueue: payload: " + pgErr.Message, err: err}
	}
	if err != nil {
		return false, fmt.Errorf("dispatcher.Enqueue(%q, %q): %w", in.EventID, in.Channel, err)
	}
	return inserted, nil
}

// payloadCastErrors are the SQLSTATEs with which $3::jsonb refuses JSON that Go
// accepts: \u0000 or a lone surrogate (22P05, 22P02), a number past numeric's
// range (22003), nesting past the server's stack (54001). The text arguments
// are checked before the call, so these can only be the payload.
var payloadCastErrors = map[string]bool{"22P02": true, "22P05": true, "22003": true, "54001": true}

func encodePayload(p any) (string, error) {
	switch v := p.(type) {
	case nil:
		return "", errors.New("is required")
	case json.RawMessage:
		return validJSON([]byte(v))
	case []byte:
		return validJSON(v)
	case string:
		return validJSON([]byte(v))
	}
	b, err := json.Marshal(p)
	return string(b), err
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func validJSON(b []byte) (string, error) {
	if !json.Valid(b) {
		return "", errors.New("must be a JSON object, got invalid JSON")
	}
	if !utf8.Valid(b) {
		return "", errors.New("must be UTF-8")
	}
	return string(b), nil
}
