package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/attemptdb"

	"github.com/effectd/effectd/internal/query/readdb"
)

// Bounds of the operator's reads: a page of intents ends early, with Next
// set, once its rows reach MaxPageBytes (payloads can be up to 1 MiB each),
// and IntentDetail shows an intent's newest MaxDetailRows attempts and audit
// entries.
const (
	MaxPageBytes  = 4 << 20
	MaxDetailRows = 200
)

// ListIntents reads up to f.Limit intents by id, fewer when they reach
// MaxPageBytes; it stops reading at the first row it will not answer.
func (svc *Service) ListIntents(ctx context.Context, f effectdtype.IntentFilter) (effectdtype.IntentPage, error) {
	page := effectdtype.IntentPage{Intents: []effectdtype.IntentRow{}}
	size := 0
	q := f
	q.Limit++ // one more: whether there is a next page
	err := svc.store.ListIntents(ctx, svc.pool, q, func(it effectdtype.IntentRow) bool {
		n := rowBytes(it)
		if int64(len(page.Intents)) == f.Limit || (len(page.Intents) > 0 && size+n > MaxPageBytes) {
			next := page.Intents[len(page.Intents)-1].ID
			page.Next = &next
			return false
		}
		page.Intents = append(page.Intents, it)
		size += n
		return true
	})
	return page, err
}

// rowBytes estimates the size of it in an answer.
func rowBytes(it effectdtype.IntentRow) int {
	n := 512 + len(it.Payload) + len(it.EventID) + len(it.IdempotencyKey)
	for _, s := range []*string{it.ProviderRef, it.LastError, it.OrderingKey} {
		if s != nil {
			n += len(*s)
		}
	}
	return n
}

// IntentDetail reads intent id with its newest MaxDetailRows attempts and
// audit entries, from one snapshot so that they agree; ErrNotFound when there
// is no such intent.
func (svc *Service) IntentDetail(ctx context.Context, id int64) (d effectdtype.IntentDetail, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("get intent %d: %w", id, err)
		}
	}()
	tx, err := svc.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return d, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	d.Intent, err = readdb.SelectIntent(ctx, tx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if d.Attempts, err = attemptdb.ListAttempts(ctx, tx, id, MaxDetailRows+1); err != nil {
		return d, err
	}
	if d.Audit, err = accessdb.ListAudit(ctx, tx, id, MaxDetailRows+1); err != nil {
		return d, err
	}
	traceparent, _, err := readdb.IntentTraceparent(ctx, tx, id)
	if err != nil {
		return d, err
	}
	d.TraceID = dispatcher.TraceID(traceparent)
	// One row past the bound was read to know that older ones exist.
	if len(d.Attempts) > MaxDetailRows {
		d.Attempts, d.AttemptsTruncated = d.Attempts[1:], true
	}
	if len(d.Audit) > MaxDetailRows {
		d.Audit, d.AuditTruncated = d.Audit[1:], true
	}
	return d, nil
}

// IntentChannel returns the channel of intent id; ErrNotFound when there is
// no such intent.
func (svc *Service) IntentChannel(ctx context.Context, id int64) (string, error) {
	channel, err := readdb.IntentChannel(ctx, svc.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return channel, err
}

// ListProviderEvents reads up to f.Limit provider events by id.
func (svc *Service) ListProviderEvents(ctx context.Context, f effectdtype.EventFilter) (effectdtype.ProviderEventPage, error) {
	var page effectdtype.ProviderEventPage
	q := f
	q.Limit++ // one more: whether there is a next page
	events, err := readdb.ListEvents(ctx, svc.pool, q)
	if err != nil {
		return page, err
	}
	page.Events = events
	if int64(len(events)) > f.Limit {
		page.Events = events[:f.Limit]
		next := page.Events[f.Limit-1].ID
		page.Next = &next
	}
	return page, nil
}
