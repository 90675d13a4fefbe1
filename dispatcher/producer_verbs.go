package dispatcher

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/intentdb"
)

// IntentKey names one intent of the producer: its event and channel and, in
// the distributed mode, the producer's bucket (the value of its
// distribution column), as effectd.enqueue takes it.
type IntentKey struct {
	EventID string
	Channel string
	Bucket  *int64 // nil on one node; required in the distributed mode
}

// Cancel cancels the PENDING intent key names (due or scheduled) inside tx,
// the producer's own transaction, giving reason for the audit: rolled back
// with tx, and told to the producer once on commit like any outcome. It
// returns the intent's status after the call: "CANCELLED" when it is
// cancelled (now or before: a second Cancel answers the same), or the status
// it was left in when it was already past PENDING ("SENDING", "IN_DOUBT",
// "SENT", "FAILED", "SKIPPED"). No such intent returns ErrNotFound; a channel
// the producer role may not use, a *pgconn.PgError with code 42501.
func Cancel(ctx context.Context, tx Tx, key IntentKey, reason string) (status string, err error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	s, err := intentdb.Cancel(ctx, tx, key.EventID, key.Channel, reason, key.Bucket)
	if err = verbError(err); err != nil {
		return "", opError(err, "Cancel(%q, %q)", key.EventID, key.Channel)
	}
	if s == nil {
		return "", opError(ErrNotFound, "Cancel(%q, %q)", key.EventID, key.Channel)
	}
	return *s, nil
}

// IntentStatus is what a producer may read of its intent (effectd.status's
// answer): never its payload or error text, which may hold values its
// channel redacts.
type IntentStatus = effectdtype.IntentStatus

// Status reads the intent key names inside tx. No such intent returns
// ErrNotFound.
func Status(ctx context.Context, tx Tx, key IntentKey) (IntentStatus, error) {
	if err := checkKey(key); err != nil {
		return IntentStatus{}, err
	}
	s, err := intentdb.Status(ctx, tx, key.EventID, key.Channel, key.Bucket)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err = verbError(err); err != nil {
		return IntentStatus{}, opError(err, "Status(%q, %q)", key.EventID, key.Channel)
	}
	return s, nil
}

// BatchOptions are EnqueueMany's options.
type BatchOptions struct {
	// KeepValid records the valid intents of a batch that has invalid ones
	// and answers the rest as invalid; without it such a batch is refused
	// whole with a *BatchError and nothing is recorded.
	KeepValid bool
	Bucket    *int64 // the producer's bucket in the distributed mode; nil on one node
}

// Batch outcomes, one per intent of a batch.
const (
	BatchNew       = "new"       // recorded
	BatchDuplicate = "duplicate" // an intent of its event and channel exists, or an earlier one of the batch: nothing changed
	BatchInvalid   = "invalid"   // refused (only with KeepValid): Field and Message say why
)

// BatchResult is EnqueueMany's answer for one intent of the batch.
type BatchResult struct {
	Outcome string // BatchNew, BatchDuplicate or BatchInvalid
	Field   string // for BatchInvalid: the field refused, as InputError names it
	Message string // for BatchInvalid: why
}

// BatchError refuses a batch with invalid intents: nothing was recorded.
type BatchError struct {
	Rows []RowError // every invalid intent, in the batch's order
	err  error
}

// RowError is one invalid intent of a refused batch.
type RowError struct {
	Index   int // its index in the batch, from 0
	Field   string
	Message string
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dispatcher.EnqueueMany: %d invalid intents, nothing recorded:", len(e.Rows))
	for i, r := range e.Rows {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(e.Rows)-10)
			break
		}
		fmt.Fprintf(&b, " [%d] %s;", r.Index, r.Message)
	}
	return b.String()
}

// Unwrap returns the database error, if the database refused the batch.
func (e *BatchError) Unwrap() error { return e.err }

// EnqueueMany records intents inside tx, the producer's own transaction, as
// Enqueue records each (the same checks, dedupe and producer check) in one
// call, and returns one BatchResult per intent in their order. A batch with
// an invalid intent returns a *BatchError naming each and records nothing,
// unless opts.KeepValid. A channel the producer role may not use refuses the
// whole batch (a *pgconn.PgError with code 42501), KeepValid or not.
func EnqueueMany(ctx context.Context, tx Tx, intents []Intent, opts BatchOptions) ([]BatchResult, error) {
	results := make([]BatchResult, len(intents))
	var batch intentdb.NewIntents
	var sent []int // the index in intents of each intent sent to the database
	var refused []RowError
	for i, in := range intents {
		field, msg := checkIntent(in)
		payload := ""
		if field == "" {
			var err error
			if payload, err = encodePayload(in.Payload); err != nil {
				field, msg = "payload", "effectd.enqueue: payload: "+err.Error()
			}
		}
		if field != "" {
			refused = append(refused, RowError{Index: i, Field: field, Message: msg})
			results[i] = BatchResult{Outcome: BatchInvalid, Field: field, Message: msg}
			continue
		}
		sent = append(sent, i)
		batch.EventIDs = append(batch.EventIDs, in.EventID)
		batch.Channels = append(batch.Channels, in.Channel)
		batch.Payloads = append(batch.Payloads, payload)
		batch.OccurredAt = append(batch.OccurredAt, nullTime(in.OccurredAt))
		batch.NotBefore = append(batch.NotBefore, nullTime(in.NotBefore))
		batch.OrderingKeys = append(batch.OrderingKeys, nullString(in.OrderingKey))
	}
	if len(refused) > 0 && !opts.KeepValid {
		return nil, &BatchError{Rows: refused}
	}
	if len(sent) == 0 {
		return results, nil
	}
	if tp := traceparentOf(ctx); tp != "" {
		if err := intentdb.SetTraceparent(ctx, tx, tp); err != nil {
			return nil, fmt.Errorf("dispatcher.EnqueueMany: %w", err)
		}
	}
	answers, err := intentdb.EnqueueMany(ctx, tx, batch, opts.KeepValid, opts.Bucket)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22023" && pgErr.ColumnName == "intents" {
		var rows []struct {
			Ord            int
			Field, Message string
		}
		if json.Unmarshal([]byte(pgErr.Detail), &rows) == nil {
			for _, r := range rows {
				refused = append(refused, RowError{Index: sent[r.Ord-1], Field: r.Field, Message: r.Message})
			}
			slices.SortFunc(refused, func(a, b RowError) int { return cmp.Compare(a.Index, b.Index) })
			return nil, &BatchError{Rows: refused, err: err}
		}
	}
	if err = verbError(err); err != nil {
		return nil, opError(err, "EnqueueMany(%d intents)", len(intents))
	}
	if len(answers) != len(sent) {
		return nil, opError(fmt.Errorf("%d answers for %d intents", len(answers), len(sent)), "EnqueueMany(%d intents)", len(intents))
	}
	for j, a := range answers {
		r := BatchResult{Outcome: a.Outcome}
		if a.Field != nil {
			r.Field = *a.Field
		}
		if a.Message != nil {
			r.Message = *a.Message
		}
		results[sent[j]] = r
	}
	return results, nil
}

// checkIntent refuses, as Enqueue does before it calls the database, text
// that PostgreSQL cannot carry; it returns the field and the message.
func checkIntent(in Intent) (field, msg string) {
	for _, f := range [...]struct{ name, value string }{{"event_id", in.EventID}, {"channel", in.Channel}, {"ordering_key", in.OrderingKey}} {
		if !utf8.ValidString(f.value) || strings.IndexByte(f.value, 0) >= 0 {
			return f.name, "effectd.enqueue: " + f.name + ": must be UTF-8 text without NUL bytes"
		}
	}
	return "", ""
}

// checkKey refuses a key whose text PostgreSQL cannot carry.
func checkKey(key IntentKey) error {
	if field, msg := checkIntent(Intent{EventID: key.EventID, Channel: key.Channel}); field != "" {
		return &InputError{Field: field, Message: msg}
	}
	return nil
}

// verbError turns a refusal of bad input (22023) into an *InputError.
func verbError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22023" {
		return &InputError{Field: pgErr.ColumnName, Message: pgErr.Message, err: err}
	}
	return err
}
