package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/policy"
)

// Harness is one implementation's store on a fresh, migrated database.
type Harness struct {
	Store storage.Store
	Pool  *pgxpool.Pool
	// Enqueue enqueues, in a transaction of its own, a PENDING intent of
	// channel for event; i picks its bucket where the mode has buckets.
	Enqueue func(t *testing.T, channel, event string, i int)
}

// behaviours are the contract, one channel each so that they share a
// database.
var behaviours = []struct {
	channel string
	run     func(t *testing.T, h Harness)
}{
	{"claim", claimTakesDueSkipsHeld},
	{"complete", completeFencedOnKeyAttemptsStatus},
	{"settle", settleOfExpiredLeaseFenced},
	{"events", settleByEventFencedOnKey},
	{"polls", pollsDueAndRecordFenced},
	{"prune", pruneRemovesOnlySettledPastRetention},
	{"dedupe", dedupeKeysKeptWithinHorizon},
	{"counts", countsAgree}, // last: it reads what the others left
}

// Run registers the suite's channels on the harness's database and runs
// every behaviour against its store, in order.
func Run(t *testing.T, h Harness) {
	t.Helper()
	ctx := context.Background()
	var chans []dispatcher.Channel
	for _, b := range behaviours {
		chans = append(chans, dispatcher.Channel{Name: b.channel, Kind: "webhook", Policy: policy.Default("webhook")})
	}
	if err := dispatcher.Register(ctx, h.Pool, chans); err != nil {
		t.Fatal(err)
	}
	for _, b := range behaviours {
		t.Run(b.channel, func(t *testing.T) { b.run(t, h) })
	}
}

// onPool runs each statement of a store on pool, as the dispatcher's held
// connections would.
func onPool(pool *pgxpool.Pool) storage.Runner {
	return func(ctx context.Context, fn func(query.TxDB) error) error { return fn(pool) }
}

// testCtx is a context that ends before the test's own deadline would: a
// statement that waits on a lock fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// claim claims up to n intents of channel under lease.
func claim(t *testing.T, h Harness, channel string, n int, lease time.Duration) []intentdb.Claimed {
	t.Helper()
	rows, _, err := h.Store.Claim(testCtx(t), onPool(h.Pool), intentdb.ClaimParams{Channel: channel, Lease: lease, Limit: n})
	if err != nil {
		t.Fatalf("Claim(%s): %v", channel, err)
	}
	return rows
}

// row is an intent as the suite checks it.
type row struct {
	ID          int64
	Status      string
	Attempts    int32
	Key         string
	LeaseLive   bool
	ProviderRef string
	Delivery    string
}

// intent reads the intent of event.
func intent(t *testing.T, h Harness, event string) row {
	t.Helper()
	var r row
	err := h.Pool.QueryRow(testCtx(t), `SELECT id, status, attempts, idempotency_key, coalesce(lease_expires_at > now(), false),
		coalesce(provider_ref, ''), coalesce(delivery, '') FROM effectd.intents WHERE event_id = $1`, event).
		Scan(&r.ID, &r.Status, &r.Attempts, &r.Key, &r.LeaseLive, &r.ProviderRef, &r.Delivery)
	if err != nil {
		t.Fatalf("intent %s: %v", event, err)
	}
	return r
}

// byID finds the claimed row of id.
func byID(rows []intentdb.Claimed, id int64) (intentdb.Claimed, bool) {
	for _, r := range rows {
		if r.ID == id {
			return r, true
		}
	}
	return intentdb.Claimed{}, false
}

// inTx runs fn in a transaction on h's pool and commits it.
func inTx(t *testing.T, h Harness, fn func(ctx context.Context, tx pgx.Tx) error) {
	t.Helper()
	ctx := testCtx(t)
	err := pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error { return fn(ctx, tx) })
	if err != nil {
		t.Fatal(err)
	}
}

// errNoIntent is an EventIntent that found none.
func errNoIntent(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
