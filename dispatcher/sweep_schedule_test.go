package dispatcher_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
)

// TestScheduledSweep runs three Stripe channels on one sandbox holding a
// refund that no intent has (an orphan to each of them): "off" with no
// schedule, "held" and "swept" every minute, "held" with its sweep lock taken
// by another session. The scheduler's clock moves a minute on; within a
// deadline "swept" reports the orphan through the metric and the last-run
// gauges, while in the same pass "off" ran nothing and "held" was left to
// the lock's holder; once the lock is free, "held" sweeps at its next time.
func TestScheduledSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_effectd", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	every := fastPolicy("stripe")
	every.Sweep = policy.SweepSchedule{Every: policy.Duration(time.Minute), Window: policy.Duration(time.Hour)}
	pool := pgtest.New(t)

	// The scheduler's clock stands still at start until the test moves it.
	start := time.Now()
	var offset atomic.Int64
	var looked atomic.Bool // the scheduler has read its clock
	now := func() time.Time {
		looked.Store(true)
		return start.Add(time.Duration(offset.Load()))
	}
	// The lock of "held", taken by another session before the dispatcher starts.
	locker, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Release()
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_lock($1)`, dispatcher.SweepLockKey("held")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Send(ctx, "ghost-key", json.RawMessage(`{"type":"refund","payment_intent":"pi_sweep","amount":300}`),
		map[string]string{effect.MetaEventID: "ghost", effect.MetaIntentID: "987654321"}); err != nil {
		t.Fatal(err)
	}
	// The channels in this order: a pass reaches "off" and "held" before "swept".
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{
		{Name: "off", Kind: "stripe", Provider: st, Policy: fastPolicy("stripe")},
		{Name: "held", Kind: "stripe", Provider: st, Policy: every},
		{Name: "swept", Kind: "stripe", Provider: st, Policy: every},
	}}, func(d *dispatcher.Dispatcher) { dispatcher.SetSweepClock(d, 10*time.Millisecond, now) })

	eventually(t, 10*time.Second, "the scheduler's first look", looked.Load)
	if _, _, ok := dispatcher.SweepLastRun(d, "swept"); ok {
		t.Fatal("swept at start: a schedule first seen waits for its next time")
	}
	offset.Add(int64(time.Minute))
	eventually(t, 10*time.Second, "the scheduled sweep of swept", func() bool {
		_, _, ok := dispatcher.SweepLastRun(d, "swept")
		return ok
	})
	if n := dispatcher.SweepFindings(d, "swept", effectdtype.FindingOrphan); n != 1 {
		t.Errorf("swept: effectd_sweep_findings_total{kind=orphan} = %v, want 1", n)
	}
	at, findings, _ := dispatcher.SweepLastRun(d, "swept")
	if findings != 1 {
		t.Errorf("swept: effectd_sweep_last_run_findings = %v, want 1", findings)
	}
	if want := float64(start.Add(time.Minute).UnixMilli()) / 1e3; at != want {
		t.Errorf("swept: effectd_sweep_last_run_timestamp_seconds = %v, want %v (the scheduler's clock)", at, want)
	}

	t.Run("off runs nothing", func(t *testing.T) {
		if _, _, ok := dispatcher.SweepLastRun(d, "off"); ok {
			t.Error("off: a schedule of 0 swept")
		}
		if n := dispatcher.SweepFindings(d, "off", effectdtype.FindingOrphan); n != 0 {
			t.Errorf("off: effectd_sweep_findings_total{kind=orphan} = %v, want 0", n)
		}
	})
	t.Run("held is left to the lock's holder", func(t *testing.T) {
		if _, _, ok := dispatcher.SweepLastRun(d, "held"); ok {
			t.Error("held: swept while another session held its sweep lock")
		}
		if _, err := locker.Exec(ctx, `SELECT pg_advisory_unlock($1)`, dispatcher.SweepLockKey("held")); err != nil {
			t.Fatal(err)
		}
		offset.Add(int64(time.Minute))
		eventually(t, 10*time.Second, "the scheduled sweep of held once its lock is free", func() bool {
			_, _, ok := dispatcher.SweepLastRun(d, "held")
			return ok
		})
	})
}
