package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// pruneEvery is how often effectd serve prunes.
const pruneEvery = dispatcher.DefaultPruneInterval

// minRetention is the shortest retention a channel's policy accepts.
const minRetention = time.Hour

// soakMinute is one line of the soak: what happened in one interval.
type soakMinute struct {
	Minute  int
	Offered int             // producer commits
	Late    int             // commits started more than 10 ms after their slot
	Sent    int             // first calls that reached the sandbox
	lat     []time.Duration // commit → provider of those calls, sorted

	harnessdb.TableStats
	RSSKB int64 // effectd serve's resident memory
}

// size is what the bound is about: both tables with their indexes and TOAST.
func (m soakMinute) size() int64 { return m.IntentsTotal + m.AttemptsTotal }

// soakVerdict is the soak's pass rule applied to its lines.
type soakVerdict struct {
	Window            int // lines per compared window
	FirstP99, LastP99 time.Duration
	RefFrom, RefTo    int   // minutes (1-based, inclusive) of the reference size window; 0 when too short
	SizeRef, SizeLast int64 // max size in the reference window and in the last window
	Failures          []string
}

// pass reports whether no rule failed.
func (v soakVerdict) pass() bool { return len(v.Failures) == 0 }

// soakWindow is how many lines each compared window holds: five, or a fifth
// (at least one) of a run shorter than ten lines.
func soakWindow(n int) int {
	if n >= 10 {
		return 5
	}
	return max(1, n/5)
}

// judgeSoak applies the pass rule to the lines ms. steady is how many lines
// pass before the table can be at its steady size (retention plus one prune
// interval). The rule: the p99 of the last window's calls is at most 1.5× the
// first window's; at most 1% of commits started over 10 ms after their slot
// (else the load offered was not the rate asked for); the largest size in the
// last window is at most 1.5× the largest in the first window after steady,
// which must end before the last window starts.
func judgeSoak(lines []soakMinute, steady int) soakVerdict {
	n := len(lines)
	w := soakWindow(n)
	v := soakVerdict{Window: w}
	if n == 0 {
		v.Failures = append(v.Failures, "no lines")
		return v
	}
	p99 := func(win []soakMinute) (time.Duration, bool) {
		var all []time.Duration
		for _, m := range win {
			all = append(all, m.lat...)
		}
		if len(all) == 0 {
			return 0, false
		}
		slices.Sort(all)
		return quantile(all, .99), true
	}
	first, okFirst := p99(lines[:w])
	last, okLast := p99(lines[n-w:])
	v.FirstP99, v.LastP99 = first, last
	switch {
	case !okFirst:
		v.Failures = append(v.Failures, "no call reached the provider in the first window")
	case !okLast:
		v.Failures = append(v.Failures, "no call reached the provider in the last window")
	case float64(last) > 1.5*float64(first):
		v.Failures = append(v.Failures, fmt.Sprintf("last p99 %.1f ms > 1.5 × first p99 %.1f ms", ms(last), ms(first)))
	}
	var offered, late int
	for _, m := range lines {
		offered, late = offered+m.Offered, late+m.Late
	}
	if float64(late) > 0.01*float64(offered) {
		v.Failures = append(v.Failures, fmt.Sprintf("the rate was not kept: %d of %d commits started over 10 ms after their slot (over 1%%)", late, offered))
	}
	if steady+w > n-w {
		v.Failures = append(v.Failures, fmt.Sprintf("too short to judge the size: %d lines, need %d (%d to reach steady size, then two windows of %d)",
			n, steady+2*w, steady, w))
		return v
	}
	v.RefFrom, v.RefTo = steady+1, steady+w
	for _, m := range lines[steady : steady+w] {
		v.SizeRef = max(v.SizeRef, m.size())
	}
	for _, m := range lines[n-w:] {
		v.SizeLast = max(v.SizeLast, m.size())
	}
	if float64(v.SizeLast) > 1.5*float64(v.SizeRef) {
		v.Failures = append(v.Failures, fmt.Sprintf("size %.1f MB in the last window > 1.5 × %.1f MB", mb(v.SizeLast), mb(v.SizeRef)))
	}
	return v
}

func quantile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(b int64) float64         { return float64(b) / (1 << 20) }

// arrival is the first call for offered event i reaching the sandbox.
type arrival struct {
	i  int
	at time.Time
}

// soak: a steady rate offered for a long time against one effectd serve with
// a short retention, one line per interval, then the verdict.
func (e *env) soak(ctx context.Context) error {
	o := e.opt
	pool, in, err := e.startSoak(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	stopped := false
	defer func() {
		if !stopped {
			in.stop()
		}
	}()

	n := int(float64(o.SoakRate) * o.SoakDuration.Seconds())
	if n < 1 {
		return fmt.Errorf("--soak-rate × --soak-duration offers no event")
	}
	r := &soakRun{prefix: fmt.Sprintf("s%d-", e.seq), n: n, rate: o.SoakRate, pool: pool,
		commits: make([]atomic.Int64, n), calls: make([]atomic.Int32, n)}
	seen := r.seen
	e.onCall.Store(&seen)
	defer e.onCall.Store(nil)

	e.soakHeader()
	r.start = time.Now().Add(50 * time.Millisecond)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.produce(pctx, cancel, o.Producers)
	lines, err := r.collect(ctx, pctx, in.cmd.Process.Pid, o.SoakInterval, r.start.Add(o.SoakDuration), e.out)
	if err != nil {
		return err
	}

	stopped = true
	if err := in.stop(); err != nil {
		return fmt.Errorf("effectd serve: %w", err)
	}
	lost, dups, redelivered := r.tally(e.sandbox.Ledger)
	committed := r.committed()
	steady := int((o.SoakRetention + pruneEvery + o.SoakInterval - 1) / o.SoakInterval)
	v := judgeSoak(lines, steady)
	if lost+dups > 0 {
		v.Failures = append(v.Failures, fmt.Sprintf("lost %d, duplicates %d", lost, dups))
	}
	if n-committed > n/100 {
		v.Failures = append(v.Failures, fmt.Sprintf("%d of %d events were never offered: the producers fell behind the rate", n-committed, n))
	}
	e.soakReport(v)
	fmt.Fprintf(e.out, "  %d of %d events offered; applied once each per the sandbox's ledger: lost %d, duplicates %d (%d calls redelivered, deduplicated by webhook-id)\n",
		committed, n, lost, dups, redelivered)
	if !v.pass() {
		fmt.Fprintf(e.out, "  FAIL: %s\n", strings.Join(v.Failures, "; "))
		return fmt.Errorf("FAIL: %s", strings.Join(v.Failures, "; "))
	}
	fmt.Fprintln(e.out, "  PASS")
	return nil
}

// startSoak makes a fresh database whose channel keeps terminal rows for the
// soak's retention and starts one effectd serve on it.
func (e *env) startSoak(ctx context.Context) (*pgxpool.Pool, *instance, error) {
	o := e.opt
	retention := o.SoakRetention
	url, pool, cfg, err := e.fresh(ctx, o.Concurrency, fmt.Sprintf(", retention: %s", max(retention, minRetention)))
	if err != nil {
		return nil, nil, err
	}
	if retention < minRetention {
		// A policy refuses a retention under an hour (the dedupe window), so
		// terminal rows are dated back by the difference when they become
		// terminal: the pruner, at its one-hour retention, deletes them
		// `retention` after they finished.
		if err := harnessdb.AgeTerminal(ctx, pool, minRetention-retention); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("installing the ageing trigger: %w", err)
		}
	}
	in, err := e.serve(ctx, url, cfg, false)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, in, nil
}

// soakHeader prints what the soak offers and the header of its lines.
func (e *env) soakHeader() {
	o := e.opt
	fmt.Fprintf(e.out, "soak: %d events/s offered for %s by %d producers to 1 effectd serve (webhook channel, concurrency %d)\n",
		o.SoakRate, o.SoakDuration, o.Producers, o.Concurrency)
	fmt.Fprintf(e.out, "  retention %s (terminal rows pruned every %s), a line every %s\n", o.SoakRetention, pruneEvery, o.SoakInterval)
	fmt.Fprintf(e.out, "  %4s %8s %8s %5s %7s %7s | %-37s | %-25s | %6s\n", "min", "offered", "sent", "late", "p50 ms", "p99 ms",
		"intents: heap MB  idx MB  rows  dead  autovac", "attempts: MB  dead  autovac", "RSS MB")
}

// soakReport prints the figures the verdict v compared.
func (e *env) soakReport(v soakVerdict) {
	unit := fmt.Sprintf("%d lines", v.Window)
	if e.opt.SoakInterval == time.Minute {
		unit = fmt.Sprintf("%d min", v.Window)
	}
	fmt.Fprintf(e.out, "  p99 commit → provider: first %s %.1f ms, last %s %.1f ms; rule: last ≤ 1.5 × first = %.1f ms\n",
		unit, ms(v.FirstP99), unit, ms(v.LastP99), 1.5*ms(v.FirstP99))
	if v.RefFrom > 0 {
		ref := fmt.Sprintf("lines %d–%d", v.RefFrom, v.RefTo)
		if v.RefFrom == v.RefTo {
			ref = fmt.Sprintf("line %d", v.RefFrom)
		}
		fmt.Fprintf(e.out, "  size of intents + attempts (heap, indexes, TOAST): max %.1f MB in %s (the first after retention + one prune),"+
			" max %.1f MB in the last %s; rule: ≤ 1.5 × %.1f = %.1f MB\n",
			mb(v.SizeRef), ref, mb(v.SizeLast), unit, mb(v.SizeRef), 1.5*mb(v.SizeRef))
	}
}

// soakRun is what the soak's producers, its line loop and the sandbox's call
// hook share: for each of the n events offered, when it was committed and how
// many calls for it reached the sandbox.
type soakRun struct {
	prefix string // of the events' ids
	n      int
	rate   int // events per second
	pool   *pgxpool.Pool
	start  time.Time // of the first event's slot

	producers sync.WaitGroup
	errc      chan error // the producers' first errors

	commits []atomic.Int64 // unix nanoseconds of each commit
	calls   []atomic.Int32 // calls per event at the sandbox

	mu       sync.Mutex
	arrived  []arrival // first calls not yet taken into a line
	arrivedN atomic.Int64

	next, offered, late atomic.Int64
	ended               atomic.Bool // the duration is over: no new event is offered
}

// seen counts one call reaching the sandbox with the webhook-id key.
func (r *soakRun) seen(key string, at time.Time) {
	rest, ok := strings.CutPrefix(key, "bench:"+r.prefix)
	if !ok {
		return
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= r.n {
		return
	}
	if r.calls[i].Add(1) == 1 {
		r.mu.Lock()
		r.arrived = append(r.arrived, arrival{i, at})
		r.mu.Unlock()
		r.arrivedN.Add(1)
	}
}

// produce starts count producers committing event i at its slot, start +
// i/rate; the first error cancels ctx.
func (r *soakRun) produce(ctx context.Context, cancel context.CancelFunc, count int) {
	r.errc = make(chan error, count)
	for range count {
		r.producers.Go(func() {
			for ctx.Err() == nil && !r.ended.Load() {
				i := int(r.next.Add(1) - 1)
				if i >= r.n {
					return
				}
				at := r.start.Add(time.Duration(float64(i) / float64(r.rate) * float64(time.Second)))
				if d := time.Until(at); d > 0 {
					time.Sleep(d) // pacing the offered load, not waiting for a result
				} else if d < -10*time.Millisecond {
					r.late.Add(1)
				}
				if err := enqueueOne(ctx, r.pool, fmt.Sprintf("%s%07d", r.prefix, i)); err != nil {
					r.errc <- err
					cancel()
					return
				}
				r.commits[i].Store(time.Now().UnixNano())
				r.offered.Add(1)
			}
		})
	}
}

// collect takes a line every interval from start until end, printing each to
// out; pid is effectd serve's. pctx ends early when a producer fails.
func (r *soakRun) collect(ctx, pctx context.Context, pid int, interval time.Duration, end time.Time, out io.Writer) ([]soakMinute, error) {
	var lines []soakMinute
	var pending []arrival // calls that arrived before their commit time was stored
	for k := 1; ; k++ {
		tick := r.start.Add(time.Duration(k) * interval)
		last := !tick.Before(end)
		if last {
			tick = end
		}
		select {
		case <-time.After(time.Until(tick)):
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			r.producers.Wait()
			select {
			case err := <-r.errc:
				return nil, err
			default:
				return nil, pctx.Err()
			}
		}
		if last {
			// Producers that fell behind do not catch up past the end: the
			// slots not reached are reported. The last line also counts the
			// calls still under way at the end.
			r.ended.Store(true)
			r.producers.Wait()
			r.awaitCalls(ctx, r.committed(), time.Minute)
		}
		m := soakMinute{Minute: k, Offered: int(r.offered.Swap(0)), Late: int(r.late.Swap(0))}
		pending = r.latencies(&m, pending)
		stats, err := harnessdb.ReadTableStats(ctx, r.pool)
		if err != nil {
			return nil, fmt.Errorf("table statistics: %w", err)
		}
		m.TableStats = stats
		m.RSSKB = rssKB(pid)
		lines = append(lines, m)
		fmt.Fprintln(out, m.line())
		if last {
			return lines, nil
		}
	}
}

// awaitCalls waits, at most for timeout, until committed events have had a
// call reach the sandbox.
func (r *soakRun) awaitCalls(ctx context.Context, committed int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for r.arrivedN.Load() < int64(committed) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// latencies puts into m the commit → provider latency of each first call that
// arrived since the last line, and of those pending from earlier lines; it
// returns the calls whose commit time is not stored yet.
func (r *soakRun) latencies(m *soakMinute, pending []arrival) []arrival {
	r.mu.Lock()
	pending, r.arrived = append(pending, r.arrived...), nil
	r.mu.Unlock()
	rest := pending[:0]
	for _, a := range pending {
		c := r.commits[a.i].Load()
		if c == 0 {
			rest = append(rest, a)
			continue
		}
		m.lat = append(m.lat, a.at.Sub(time.Unix(0, c)))
	}
	slices.Sort(m.lat)
	m.Sent = len(m.lat)
	return rest
}

// committed is how many events were committed.
func (r *soakRun) committed() int {
	n := 0
	for i := range r.commits {
		if r.commits[i].Load() != 0 {
			n++
		}
	}
	return n
}

// tally counts, per the sandbox's ledger, the committed events never applied
// (lost), the applications beyond the first (dups), and the calls beyond the
// first that reached the sandbox (redelivered).
func (r *soakRun) tally(ledger *sandbox.Ledger) (lost, dups, redelivered int) {
	for i := range r.n {
		if r.commits[i].Load() == 0 {
			continue // never offered: the producers fell behind
		}
		switch a := ledger.Applied("webhook", fmt.Sprintf("bench:%s%07d", r.prefix, i)); {
		case a == 0:
			lost++
		case a > 1:
			dups += a - 1
		}
		redelivered += max(int(r.calls[i].Load())-1, 0)
	}
	return lost, dups, redelivered
}

// line formats m as one row under the soak's header.
func (m soakMinute) line() string {
	p50, p99 := 0.0, 0.0
	if len(m.lat) > 0 {
		p50, p99 = ms(quantile(m.lat, .50)), ms(quantile(m.lat, .99))
	}
	return fmt.Sprintf("  %4d %8d %8d %5d %7.1f %7.1f | %15.1f %7.1f %7d %6d %7d | %12.1f %5d %8d | %6.1f",
		m.Minute, m.Offered, m.Sent, m.Late, p50, p99,
		mb(m.IntentsHeap), mb(m.IntentsIndexes), m.IntentsLive, m.IntentsDead, m.IntentsAutovac,
		mb(m.AttemptsTotal), m.AttemptsDead, m.AttemptsAutovac, float64(m.RSSKB)/1024)
}
