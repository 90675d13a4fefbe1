package dispatcher_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
)

// sweptLog records the windows of the sweeps a dispatcher logs ("sweep", at
// INFO, with since and until).
type sweptLog struct {
	mu      sync.Mutex
	windows []string // "since..until", RFC 3339
}

func (l *sweptLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *sweptLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *sweptLog) WithGroup(string) slog.Handler            { return l }
func (l *sweptLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sweep" {
		return nil
	}
	var since, until time.Time
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "since":
			since, _ = a.Value.Any().(time.Time)
		case "until":
			until, _ = a.Value.Any().(time.Time)
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.windows = append(l.windows, since.UTC().Format(time.RFC3339)+".."+until.UTC().Format(time.RFC3339))
	return nil
}

func (l *sweptLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.windows...)
}

// span is "since..until" as sweptLog writes it.
func span(since, until time.Time) string {
	return since.UTC().Format(time.RFC3339) + ".." + until.UTC().Format(time.RFC3339)
}

// TestScheduledSweepsTileTime: a channel swept every minute over a minute's
// window, on a clock the test moves. The first sweep covers the minute
// before its time. A run that begins 40 s late sweeps from where the last
// window ended to its minute, not the minute before the late clock; a run
// after a minute that no run saw sweeps both minutes; and an instance started
// after two minutes that no instance swept sweeps them at once, resuming from
// the last window finished (persisted), though a schedule it sees first
// otherwise waits for its next time. The windows tile: each begins where the
// one before ended. A report over the span says it is covered, without a gap.
func TestScheduledSweepsTileTime(t *testing.T) {
	t.Parallel()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_effectd", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pol := fastPolicy("stripe")
	pol.Sweep = policy.SweepSchedule{Every: policy.Duration(time.Minute), Window: policy.Duration(time.Minute)}
	pool := pgtest.New(t)
	chans := []dispatcher.Channel{{Name: "tiled", Kind: "stripe", Provider: st, Policy: pol}}

	m0 := time.Now().Truncate(time.Minute)
	clock := func(offset *atomic.Int64, looked *atomic.Bool) func() time.Time {
		return func() time.Time {
			looked.Store(true)
			return m0.Add(time.Duration(offset.Load()))
		}
	}
	var offset atomic.Int64
	var looked atomic.Bool
	offset.Store(int64(30 * time.Second))
	log := &sweptLog{}
	run(t, pool, dispatcher.Config{Channels: chans, Logger: slog.New(log)},
		func(d *dispatcher.Dispatcher) {
			dispatcher.SetSweepClock(d, 10*time.Millisecond, clock(&offset, &looked))
		})
	eventually(t, 10*time.Second, "the scheduler's first look", looked.Load)

	minute := func(n int) time.Time { return m0.Add(time.Duration(n) * time.Minute) }
	sweeps := func(l *sweptLog, n int, what string) {
		t.Helper()
		eventually(t, 10*time.Second, what, func() bool { return len(l.all()) >= n })
	}
	offset.Store(int64(time.Minute + 30*time.Second)) // on time, in minute 1
	sweeps(log, 1, "the first scheduled sweep")
	offset.Store(int64(2*time.Minute + 40*time.Second)) // 40 s late, in minute 2
	sweeps(log, 2, "the late sweep")
	offset.Store(int64(4*time.Minute + 10*time.Second)) // minute 3 seen by no run
	sweeps(log, 3, "the sweep after a skipped minute")

	// A second instance, started in minute 6: minutes 4 and 5 were swept by no one.
	var offset2 atomic.Int64
	var looked2 atomic.Bool
	offset2.Store(int64(6*time.Minute + 5*time.Second))
	log2 := &sweptLog{}
	d2 := run(t, pool, dispatcher.Config{Channels: chans, Logger: slog.New(log2)},
		func(d *dispatcher.Dispatcher) {
			dispatcher.SetSweepClock(d, 10*time.Millisecond, clock(&offset2, &looked2))
		})
	sweeps(log2, 1, "the started instance's sweep of the minutes no one swept")

	got := append(log.all(), log2.all()...)
	want := []string{span(minute(0), minute(1)), span(minute(1), minute(2)), span(minute(2), minute(4)), span(minute(4), minute(6))}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("scheduled windows\n  %s\nwant them to tile time\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	spans := func(ws []effectdtype.SweepWindow) string {
		var s []string
		for _, w := range ws {
			s = append(s, span(w.Since, w.Until))
		}
		return strings.Join(s, " ")
	}
	// The sweep logs its line before the schedule records its window: the
	// report reads the recorded windows once the last one is there.
	var rep effectdtype.SweepReport
	eventually(t, 10*time.Second, "the started instance's window recorded", func() bool {
		rep, err = d2.Sweep(context.Background(), "tiled", minute(-1), minute(7))
		return err != nil || spans(rep.Scheduled.Covered) == span(minute(0), minute(6))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := spans(rep.Scheduled.Covered), span(minute(0), minute(6)); got != want {
		t.Errorf("report's scheduled.covered = %s, want %s", got, want)
	}
	if got, want := spans(rep.Scheduled.Gaps), span(minute(-1), minute(0))+" "+span(minute(6), minute(7)); got != want {
		t.Errorf("report's scheduled.gaps = %s, want %s", got, want)
	}
}
