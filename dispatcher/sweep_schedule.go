package dispatcher

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/readdb"
)

// sweepLockBase is the high half of a channel's sweep lock key (see
// sweepLockKey); the low half hashes the channel's name.
const sweepLockBase = 0x65666673 // "effs"

// sweepTick is the longest the scheduler waits before it rereads the
// channels' schedules, so that a schedule changed through the admin API takes
// effect within it.
const sweepTick = 30 * time.Second

// sweeper runs each channel's scheduled reconciliation sweep (policy
// sweep.every): at every multiple of sweep.every on the clock, under the
// channel's advisory lock (one instance sweeps a channel at a time), the
// sweep of the sweep.window ending at that multiple, widened back to the end
// of the last window the schedule finished (effectd.sweep_windows), so that
// the windows tile time whatever the clock said when the run began.
type sweeper struct {
	loop
	d    *Dispatcher
	tick time.Duration
	now  func() time.Time
	// slot is, by channel, the start of the clock's current multiple of
	// sweep.every as last seen: a later one is due.
	slot map[string]time.Time
}

func newSweeper(d *Dispatcher) *sweeper {
	return &sweeper{d: d, tick: sweepTick, now: time.Now, slot: map[string]time.Time{}}
}

// Start sweeps each scheduled channel at its times until Stop.
func (s *sweeper) Start(ctx context.Context) { s.start(ctx, s.run) }

// Stop cancels a sweep in progress and waits for it.
func (s *sweeper) Stop() { s.stop() }

func (s *sweeper) run(ctx context.Context) {
	for {
		t := time.NewTimer(s.sweepDue(ctx))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// sweepDue sweeps every channel whose schedule reached a new multiple of its
// sweep.every since it last looked, and returns how long to wait before it
// looks again: until the next multiple of any channel, at most s.tick. A
// schedule seen for the first time (at Start, or set through the admin API)
// sweeps at once only the multiples no instance finished since the last
// window the schedule finished (sweep), and otherwise waits for its next.
func (s *sweeper) sweepDue(ctx context.Context) time.Duration {
	now := s.now()
	wait := s.tick
	for _, ch := range s.d.chans {
		pol := ch.policy.Load()
		every := pol.Sweep.Every.D()
		if every <= 0 {
			delete(s.slot, ch.Name)
			continue
		}
		slot := now.Truncate(every)
		wait = min(wait, slot.Add(every).Sub(now))
		last, seen := s.slot[ch.Name]
		s.slot[ch.Name] = slot
		if seen && !slot.After(last) {
			continue
		}
		if err := s.sweep(ctx, ch.Name, slot, pol.Sweep.WindowOrEvery().D(), pol.Retention.D(), !seen); err != nil && ctx.Err() == nil {
			s.d.log.ErrorContext(ctx, "scheduled sweep failed", "channel", ch.Name, "error", err)
		}
	}
	return max(wait, time.Millisecond)
}

// sweepLockKey is the advisory lock key of channel's scheduled sweep.
func sweepLockKey(channel string) int64 {
	h := fnv.New32a()
	h.Write([]byte(channel))
	return sweepLockBase<<32 | int64(h.Sum32())
}

// sweep runs channel's scheduled sweep for the multiple of sweep.every at
// slot, unless another instance holds the channel's sweep lock, which leaves
// it to that one. It sweeps from the end of the last window the schedule
// finished, or from slot-window when that is later (the windows then
// overlap by design) or when none was finished; to slot, never to the
// clock's now, so that a late run leaves no gap. A slot the schedule covered
// already is not swept again; nor is one first seen (at start, or when the
// schedule is set) when no window was ever finished, so that a restart
// neither sweeps at once nor postpones a sweep. Time older than retention
// (or than window, when longer) is not swept (its intents may be gone): it is
// logged at WARN as a gap. A span longer than SweepMaxWindow is swept in
// consecutive parts; each window is recorded as it finishes, so a failure
// resumes from the last one.
//
// It logs each kind found at WARN with its count (the findings themselves
// are the sweep's report: effectd sweep, POST /v1/sweeps) and records the run
// in the last-run gauges; Sweep counts the findings by kind.
func (s *sweeper) sweep(ctx context.Context, channel string, slot time.Time, window, retention time.Duration, firstSeen bool) error {
	d := s.d
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	key := sweepLockKey(channel)
	if got, err := query.TryLock(ctx, conn, key); err != nil || !got {
		return err
	}
	defer query.Unlock(context.WithoutCancel(ctx), conn, key)
	last, err := readdb.SweptUntil(ctx, conn, channel)
	if err != nil {
		return err
	}
	for _, w := range sweepWindows(last, slot, window, retention, firstSeen) {
		if w.gap {
			d.log.WarnContext(ctx, "scheduled sweep: a span older than the channel's retention is not swept", "channel", channel,
				"since", w.since, "until", w.until)
			continue
		}
		rep, err := d.Sweep(ctx, channel, w.since, w.until)
		if err != nil {
			return err
		}
		if err := readdb.AddSweptWindow(ctx, conn, channel, effectdtype.SweepWindow{Since: w.since, Until: w.until}, len(rep.Findings)); err != nil {
			return err
		}
		for _, k := range effectdtype.FindingKinds {
			if n := rep.Counts[k]; n > 0 {
				d.log.WarnContext(ctx, "scheduled sweep: the provider and the table disagree", "channel", channel, "kind", k, "count", n,
					"since", rep.Since, "until", rep.Until)
			}
		}
		d.m.sweepLastRun.WithLabelValues(channel).Set(float64(s.now().UnixMilli()) / 1e3)
		d.m.sweepLastSeen.WithLabelValues(channel).Set(float64(len(rep.Findings)))
	}
	return nil
}

// scheduledWindow is a window a scheduled sweep runs, or a gap it leaves.
type scheduledWindow struct {
	since, until time.Time
	gap          bool // older than the channel's retention: not swept
}

// sweepWindows returns the windows a scheduled sweep at slot runs, in order,
// given the end of the last window the schedule finished (last; zero: none),
// as sweep says.
func sweepWindows(last, slot time.Time, window, retention time.Duration, firstSeen bool) []scheduledWindow {
	switch {
	case last.IsZero() && firstSeen:
		return nil
	case !last.IsZero() && !slot.After(last):
		return nil
	}
	since := slot.Add(-window)
	if !last.IsZero() && last.Before(since) {
		since = last
	}
	var out []scheduledWindow
	if floor := slot.Add(-max(retention, window)); since.Before(floor) {
		out = append(out, scheduledWindow{since: since, until: floor, gap: true})
		since = floor
	}
	for since.Before(slot) {
		until := minTime(since.Add(SweepMaxWindow), slot)
		out = append(out, scheduledWindow{since: since, until: until})
		since = until
	}
	return out
}
