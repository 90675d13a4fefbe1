package intentdb

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
)

// TestEnqueueNotifiesWhileTheFlagHolds: effectd.enqueue NOTIFYs
// effectd_wakeup while the wake-up flag is set and holds, and not once it has
// expired (a dispatcher that stopped or died while idle) or is cleared. The
// notifications arrive in commit order, so the first one received names the
// channel of the first enqueue that notified.
func TestEnqueueNotifiesWhileTheFlagHolds(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"held": "webhook", "expired": "webhook", "cleared": "webhook", "again": "webhook"}); err != nil {
		t.Fatal(err)
	}
	listener, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if err := ListenWakeup(ctx, listener); err != nil {
		t.Fatal(err)
	}
	enqueue := func(channel string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e', channel => $1, payload => '{}'::jsonb)`, channel); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := listener.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	if err := SetWaiting(ctx, pool, true, time.Hour); err != nil {
		t.Fatal(err)
	}
	enqueue("held")
	if got := next(); got != "held" {
		t.Fatalf("notified %q, want held", got)
	}
	// the flag's hold ran out: its dispatcher is gone
	if _, err := pool.Exec(ctx, `UPDATE effectd.wakeup SET until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	enqueue("expired")
	if err := SetWaiting(ctx, pool, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	enqueue("cleared")
	if err := SetWaiting(ctx, pool, true, time.Hour); err != nil {
		t.Fatal(err)
	}
	enqueue("again")
	if got := next(); got != "again" {
		t.Fatalf("notified %q after the flag expired and was cleared, want again (the next enqueue under a held flag)", got)
	}
}
