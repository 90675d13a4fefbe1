//go:build citus

package readdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
)

// TestCitusSweepReads: in the distributed mode, the sweep's read of the
// unsettled intents that could own an object finds them on every shard
// (IN_DOUBT and FAILED settled after the object, SENDING whatever its
// update), leaving out those settled before it and the other states; and the
// scheduled sweep's windows, a table of the coordinator, are recorded and
// read back as on one node.
func TestCitusSweepReads(t *testing.T) {
	pool := citusHistory(t, 4)
	ctx := context.Background()
	statuses := []string{"IN_DOUBT", "FAILED", "SENDING", "SENT", "PENDING", "IN_DOUBT"}
	now := time.Now()
	for i, st := range statuses {
		if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'sms', bucket => $2,
			payload => '{"to": "+15005550006", "body": "hi"}'::jsonb)`, fmt.Sprint("u-", i), i*7%32); err != nil {
			t.Fatal(err)
		}
		updated, lease := now, (*time.Time)(nil)
		if i == len(statuses)-1 {
			updated = now.Add(-24 * time.Hour)
		}
		if st == "SENDING" {
			l := now.Add(time.Minute)
			lease = &l
		}
		if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = $2, attempts = 1, claimed_at = $3,
			lease_expires_at = $4, updated_at = $5 WHERE event_id = $1`, fmt.Sprint("u-", i), st, now, lease, updated); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := SweepIntentsUnsettled(ctx, pool, SweepUnsettled{Channel: "sms", First: now.Add(-time.Hour), Last: now.Add(time.Minute), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.EventID+" "+string(r.Status))
	}
	// a PENDING intent with an attempt behind it may own an object too; the SENT one and
	// the IN_DOUBT one last changed a day before the objects may not
	if want := "[u-0 IN_DOUBT u-1 FAILED u-2 SENDING u-4 PENDING]"; fmt.Sprint(got) != want {
		t.Errorf("unsettled owners: %v, want %s", got, want)
	}

	m := now.Truncate(time.Minute)
	for _, w := range []effectdtype.SweepWindow{{Since: m.Add(-3 * time.Minute), Until: m.Add(-2 * time.Minute)}, {Since: m.Add(-2 * time.Minute), Until: m}} {
		if err := AddSweptWindow(ctx, pool, "sms", w, 0); err != nil {
			t.Fatal(err)
		}
	}
	if until, err := SweptUntil(ctx, pool, "sms"); err != nil || !until.Equal(m) {
		t.Errorf("SweptUntil = %v, %v; want %v", until, err, m)
	}
	ws, err := SweptWindows(ctx, pool, "sms", m.Add(-90*time.Second), m.Add(time.Minute), 10)
	if err != nil || len(ws) != 1 || !ws[0].Until.Equal(m) {
		t.Errorf("SweptWindows = %v, %v; want the window ending %v", ws, err, m)
	}
}
