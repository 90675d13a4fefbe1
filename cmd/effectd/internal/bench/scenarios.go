package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// enqueueOne commits one producer transaction holding one enqueue.
func enqueueOne(ctx context.Context, pool *pgxpool.Pool, id string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: id, Channel: "bench", Payload: benchPayload(id)})
		return err
	})
}

// benchPayload is the payload of bench event id.
func benchPayload(id string) string { return `{"order":"` + id + `","amount":1250,"currency":"eur"}` }

// backlog enqueues n events through the producers, 5% of them delivered twice,
// and returns the committed event ids.
func (e *env) backlog(ctx context.Context, pool *pgxpool.Pool, prefix string, n int) (map[string]bool, time.Duration, error) {
	ids := make([]string, 0, n+n/20)
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s%07d", prefix, i))
		if i%20 == 0 {
			ids = append(ids, ids[len(ids)-1])
		}
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var next atomic.Int64
	var failed atomic.Pointer[error]
	start := time.Now()
	var wg sync.WaitGroup
	for range e.opt.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := enqueueOne(ctx, pool, ids[i]); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return nil, 0, *err
	}
	committed := make(map[string]bool, n)
	for _, id := range ids {
		committed[id] = true
	}
	return committed, time.Since(start), nil
}

// drained is what one backlog run measured.
type drained struct {
	intents   int           // distinct committed intents
	enqueue   time.Duration // time the producers took
	elapsed   time.Duration // from the dispatcher's start to the last effect applied
	peakKB    int64         // peak resident memory of effectd serve
	lost, dup int
}

// drainBacklog enqueues n events (5% redelivered) into a fresh database, then
// starts effectd serve with the given concurrency and waits until every
// effect is applied.
func (e *env) drainBacklog(ctx context.Context, name string, n, concurrency int) (drained, error) {
	url, pool, cfg, err := e.fresh(ctx, concurrency, "")
	if err != nil {
		return drained{}, err
	}
	defer pool.Close()
	return e.drainInto(ctx, url, pool, cfg, name, n)
}

// drainInto is drainBacklog on the database at url, whatever it holds
// already, with the YAML at cfg.
func (e *env) drainInto(ctx context.Context, url string, pool *pgxpool.Pool, cfg, name string, n int) (drained, error) {
	var r drained
	prefix := fmt.Sprintf("%s%d-", name, e.seq)
	committed, took, err := e.backlog(ctx, pool, prefix, n)
	if err != nil {
		return r, err
	}
	before, _ := e.sandbox.Ledger.Count("webhook")
	in, err := e.serve(ctx, url, cfg, true)
	if err != nil {
		return r, err
	}
	done, err := e.waitApplied(before+len(committed), 10*time.Minute)
	if serr := in.stop(); serr != nil && err == nil {
		err = fmt.Errorf("effectd serve: %w", serr)
	}
	if err != nil {
		return r, err
	}
	r = drained{intents: len(committed), enqueue: took, elapsed: done.Sub(in.started), peakKB: in.peakKB}
	r.lost, r.dup = e.integrity(prefix, committed)
	if r.lost+r.dup > 0 {
		err = fmt.Errorf("lost %d, duplicates %d", r.lost, r.dup)
	}
	return r, err
}

func (r drained) rate() float64 { return float64(r.intents) / r.elapsed.Seconds() }

// drain: a backlog enqueued first, then the dispatcher started. With memory,
// the same for a larger backlog, reporting the resident memory.
func (e *env) drain(ctx context.Context, n int, memory bool) error {
	name := map[bool]string{false: "drain", true: "memory"}[memory]
	r, err := e.drainBacklog(ctx, name, n, e.opt.Concurrency)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%s: %d events (+5%% redelivered) enqueued by %d producers in %.2fs (%.0f commits/s)\n",
		name, n, e.opt.Producers, r.enqueue.Seconds(), float64(n+n/20)/r.enqueue.Seconds())
	fmt.Fprintf(e.out, "  dispatcher: 1 instance, webhook channel, concurrency %d, claim batch 256\n", e.opt.Concurrency)
	fmt.Fprintf(e.out, "  drained %d intents in %.2fs = %.0f intents/s\n", r.intents, r.elapsed.Seconds(), r.rate())
	fmt.Fprintf(e.out, "  peak resident memory of effectd serve: %.1f MB\n", float64(r.peakKB)/1024)
	fmt.Fprintf(e.out, "  lost %d, duplicates %d\n", r.lost, r.dup)
	return nil
}

// live: events offered at a fixed rate while the dispatcher runs; latency from
// the producer's commit to the provider receiving the call.
func (e *env) live(ctx context.Context) error {
	r, err := e.liveFresh(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "live: %d events offered at %d/s over %.1fs by %d producers after a warm-up of %d events from each at once (%d started more than 10 ms late)\n",
		r.n, e.opt.Rate, r.offered.Seconds(), e.opt.Producers, warmUpPerProducer, r.late)
	fmt.Fprintf(e.out, "  dispatcher: 1 instance, webhook channel, concurrency %d\n", e.opt.Concurrency)
	fmt.Fprintf(e.out, "  commit → provider latency: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.q(.50), r.q(.95), r.q(.99), r.q(1))
	fmt.Fprintf(e.out, "  %s\n", r.stages)
	fmt.Fprintf(e.out, "  p99 of the events committed in each second, ms: %s\n", msList(r.bySecond))
	fmt.Fprintf(e.out, "  lost %d, duplicates %d\n", r.lost, r.dups)
	if r.lost+r.dups > 0 {
		return fmt.Errorf("lost %d, duplicates %d", r.lost, r.dups)
	}
	return nil
}

// lived is what one live run measured.
type lived struct {
	n          int
	start      time.Time // when the load's clock started
	offered    time.Duration
	late       int64
	lat        []time.Duration // commit → provider, sorted
	bySecond   []float64       // the p99 in ms of the events committed in each second of the load
	stages     string          // where the slowest events' time went (liveStages)
	lost, dups int
	prefix     string      // the events' ids are prefix<i>, i < n
	commits    []time.Time // when event i's producer saw its commit
}

// secondsP99 is the p99 in ms of the latencies of the events committed in
// each second from start, lat[i] being the latency of the event committed at
// commits[i].
func secondsP99(start time.Time, commits []time.Time, lat []time.Duration) []float64 {
	var buckets [][]time.Duration
	for i, c := range commits {
		s := max(int(c.Sub(start)/time.Second), 0)
		for len(buckets) <= s {
			buckets = append(buckets, nil)
		}
		buckets[s] = append(buckets[s], lat[i])
	}
	out := make([]float64, len(buckets))
	for i, b := range buckets {
		out[i] = lived{lat: slices.Sorted(slices.Values(b))}.q(.99)
	}
	return out
}

// q is the p-quantile of the latencies in milliseconds.
func (r lived) q(p float64) float64 {
	if len(r.lat) == 0 {
		return 0
	}
	return float64(r.lat[int(p*float64(len(r.lat)-1))]) / float64(time.Millisecond)
}

// liveFresh runs the live load on a fresh database.
func (e *env) liveFresh(ctx context.Context) (lived, error) {
	url, pool, cfg, err := e.fresh(ctx, e.opt.Concurrency, "")
	if err != nil {
		return lived{}, err
	}
	defer pool.Close()
	return e.liveInto(ctx, url, pool, cfg)
}

// liveInto runs the live load on the database at url, whatever it holds
// already, with the YAML at cfg.
func (e *env) liveInto(ctx context.Context, url string, pool *pgxpool.Pool, cfg string) (lived, error) {
	var r lived
	in, err := e.serve(ctx, url, cfg, false)
	if err != nil {
		return r, err
	}
	defer in.stop()
	e.seq++
	if err := e.warmUp(ctx, pool, fmt.Sprintf("w%d-", e.seq)); err != nil {
		return r, err
	}
	prefix := fmt.Sprintf("l%d-", e.seq)
	n := int(float64(e.opt.Rate) * e.opt.Duration.Seconds())
	commits := make([]time.Time, n)
	before, _ := e.sandbox.Ledger.Count("webhook")
	start := time.Now().Add(50 * time.Millisecond)
	var next atomic.Int64
	var late atomic.Int64
	errc := make(chan error, e.opt.Producers)
	var wg sync.WaitGroup
	for range e.opt.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				at := start.Add(time.Duration(float64(i) / float64(e.opt.Rate) * float64(time.Second)))
				if d := time.Until(at); d > 0 {
					time.Sleep(d) // pacing the offered load, not waiting for a result
				} else if d < -10*time.Millisecond {
					late.Add(1)
				}
				if err := enqueueOne(ctx, pool, fmt.Sprintf("%s%07d", prefix, i)); err != nil {
					errc <- err
					return
				}
				commits[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	offered := time.Since(start)
	select {
	case err := <-errc:
		return r, err
	default:
	}
	if _, err := e.waitApplied(before+n, time.Minute); err != nil {
		return r, err
	}
	at := map[string]time.Time{}
	for _, eff := range e.sandbox.Ledger.Snapshot("webhook").Effects {
		at[eff.Key] = eff.At
	}
	lat := make([]time.Duration, 0, n)
	committed := make(map[string]bool, n)
	for i, c := range commits {
		id := fmt.Sprintf("%s%07d", prefix, i)
		committed[id] = true
		lat = append(lat, at["bench:"+id].Sub(c))
	}
	bySecond := secondsP99(start, commits, lat)
	stages, err := liveStages(ctx, pool, prefix, start, commits, at)
	if err != nil {
		return r, err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r = lived{n: n, start: start, offered: offered, late: late.Load(), lat: lat, bySecond: bySecond, stages: stages, prefix: prefix, commits: commits}
	r.lost, r.dups = e.integrity(prefix, committed)
	return r, nil
}

// liveStages says where the time of a live run's slowest events went: for
// the 1% of events (committed at commits[i] as prefix<i>, received by the
// provider at at["bench:"+id]) with the longest commit → provider latency, and
// for all of them, the median of each stage: commit → claim (the claim
// transaction's start, claimed_at), claim → call (the attempt's start), call
// → provider. Read from the day partitions the run wrote (created and
// started after start, less a minute), once every event's attempt is
// recorded: the provider holds a call before its outcome is written, and the
// run ends when the provider holds them all. After stagesWait, the events
// recorded by then.
func liveStages(ctx context.Context, pool *pgxpool.Pool, prefix string, start time.Time, commits []time.Time, at map[string]time.Time) (string, error) {
	type stage struct{ claim, call, provider, total time.Duration }
	var all []stage
	deadline := time.Now().Add(stagesWait)
	for {
		all = all[:0]
		// One hash join: the fresh database's partitions have no statistics
		// yet, and the nested loop planned for them took seconds of a core.
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_nestloop = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `
				SELECT i.event_id, i.claimed_at, a.started_at
				FROM effectd.intents i
				JOIN effectd.attempts a ON a.intent_id = i.id AND a.attempt = 1 AND a.kind = 'send' AND a.started_at >= $2
				WHERE i.channel = 'bench' AND i.created_at >= $2 AND i.event_id LIKE $1 || '%'`, prefix, start.Add(-time.Minute))
			if err != nil {
				return err
			}
			var id string
			var claimed, called time.Time
			_, err = pgx.ForEachRow(rows, []any{&id, &claimed, &called}, func() error {
				var i int
				if _, err := fmt.Sscanf(strings.TrimPrefix(id, prefix), "%d", &i); err != nil || i >= len(commits) {
					return fmt.Errorf("event %q", id)
				}
				got := at["bench:"+id]
				all = append(all, stage{claim: claimed.Sub(commits[i]), call: called.Sub(claimed), provider: got.Sub(called), total: got.Sub(commits[i])})
				return nil
			})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("live stages: %w", err)
		}
		if len(all) >= len(commits) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling the completers' writes, with a deadline
		}
	}
	if len(all) == 0 {
		return "", fmt.Errorf("live stages: no attempt of %s* recorded within %s", prefix, stagesWait)
	}
	slices.SortFunc(all, func(a, b stage) int { return cmp.Compare(b.total, a.total) })
	median := func(ss []stage, f func(stage) time.Duration) float64 {
		ds := make([]time.Duration, len(ss))
		for i, s := range ss {
			ds[i] = f(s)
		}
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	line := func(ss []stage) string {
		return fmt.Sprintf("commit → claim %.1f, claim → call %.1f, call → provider %.1f ms",
			median(ss, func(s stage) time.Duration { return s.claim }),
			median(ss, func(s stage) time.Duration { return s.call }),
			median(ss, func(s stage) time.Duration { return s.provider }))
	}
	slowest := all[:max(len(all)/100, 1)]
	of := ""
	if len(all) < len(commits) {
		of = fmt.Sprintf(" of the %d events recorded within %s", len(all), stagesWait)
	}
	return fmt.Sprintf("the slowest 1%%%s: %s; all: %s (medians)", of, line(slowest), line(all)), nil
}

// stagesWait bounds how long liveStages waits for a run's attempts to be
// recorded.
const stagesWait = 30 * time.Second

// warmUpPerProducer is how many events each producer commits, all producers
// at once, before a live run's clock starts: the producer connections the
// load will use are opened and have run enqueue several times, and serve's
// connections have claimed and completed a burst, so the run's quantiles are
// the steady state and not the first connections and plans (startup is
// measured by the startup scenario). With a
// single connection warmed, the load's first second opened the other producer
// connections while it ran, and its p99 was that second's.
const warmUpPerProducer = 8

// warmUp commits warmUpPerProducer events from each of the producers at once,
// under prefix, and waits until the provider has received them all.
func (e *env) warmUp(ctx context.Context, pool *pgxpool.Pool, prefix string) error {
	before, _ := e.sandbox.Ledger.Count("webhook")
	g, gctx := errgroup.WithContext(ctx)
	for p := range e.opt.Producers {
		g.Go(func() error {
			for i := range warmUpPerProducer {
				if err := enqueueOne(gctx, pool, fmt.Sprintf("%s%03d-%d", prefix, p, i)); err != nil {
					return fmt.Errorf("warm-up: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if _, err := e.waitApplied(before+e.opt.Producers*warmUpPerProducer, time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// slow: a provider that takes SlowLatency per call; sustained throughput at a
// given concurrency.
func (e *env) slow(ctx context.Context) error {
	e.sandbox.Faults.Set("webhook", sandbox.Fault{Latency: e.opt.SlowLatency})
	defer e.sandbox.Faults.Set("webhook", sandbox.Fault{})
	r, err := e.drainBacklog(ctx, "slow", e.opt.SlowEvents, e.opt.SlowConc)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "slow provider: %d intents, %s per call, concurrency %d per instance, 1 instance\n",
		r.intents, e.opt.SlowLatency, e.opt.SlowConc)
	fmt.Fprintf(e.out, "  sustained %.0f intents/s (ceiling concurrency/latency = %.0f/s); peak memory %.1f MB\n",
		r.rate(), float64(e.opt.SlowConc)/e.opt.SlowLatency.Seconds(), float64(r.peakKB)/1024)
	fmt.Fprintf(e.out, "  lost %d, duplicates %d\n", r.lost, r.dup)
	return nil
}

// producer: effectd.enqueue against a bare INSERT of the same row, each in its
// own transaction, from concurrent producers, alternating rounds.
func (e *env) producer(ctx context.Context) error {
	_, pool, err := e.database(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"bench": "webhook"}); err != nil {
		return err
	}
	bare := func(ctx context.Context, id string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return harnessdb.InsertBareIntent(ctx, tx, harnessdb.BareIntent{EventID: id, Channel: "bench", Payload: benchPayload(id), IdempotencyKey: "bench:" + id})
		})
	}
	viaFunc := func(ctx context.Context, id string) error { return enqueueOne(ctx, pool, id) }
	modes := []struct {
		name string
		f    func(context.Context, string) error
	}{{"insert", bare}, {"enqueue", viaFunc}}
	// Warm both paths up (connections, plans, caches), then alternate short
	// rounds so that drift on this shared machine hits both alike.
	for _, m := range modes {
		if _, _, err := e.hammer(ctx, fmt.Sprintf("p%d-warm-%s-", e.seq, m.name), time.Second, m.f); err != nil {
			return err
		}
	}
	const rounds = 6
	counts := map[string]int64{}
	spent := map[string]time.Duration{}
	perRound := map[string][]string{}
	round := e.opt.Duration / rounds
	for r := range rounds {
		m := modes[r%2]
		n, d, err := e.hammer(ctx, fmt.Sprintf("p%d-%s-%d-", e.seq, m.name, r), round, m.f)
		if err != nil {
			return err
		}
		counts[m.name] += n
		spent[m.name] += d
		perRound[m.name] = append(perRound[m.name], fmt.Sprintf("%.0f", float64(n)/d.Seconds()))
	}
	ins := float64(counts["insert"]) / spent["insert"].Seconds()
	enq := float64(counts["enqueue"]) / spent["enqueue"].Seconds()
	fmt.Fprintf(e.out, "producer cost: %d producers, one intent per transaction, no dispatcher running, %d alternating rounds of %.1fs after a warm-up\n",
		e.opt.Producers, rounds, round.Seconds())
	fmt.Fprintf(e.out, "  bare INSERT ... ON CONFLICT DO NOTHING: %.0f tx/s (rounds: %s)\n", ins, strings.Join(perRound["insert"], ", "))
	fmt.Fprintf(e.out, "  SELECT effectd.enqueue(...):             %.0f tx/s (rounds: %s)\n", enq, strings.Join(perRound["enqueue"], ", "))
	fmt.Fprintf(e.out, "  cost of enqueue: %.2fx a bare insert\n", ins/enq)
	return nil
}

// hammer runs f from every producer for d and counts commits.
func (e *env) hammer(ctx context.Context, prefix string, d time.Duration, f func(context.Context, string) error) (int64, time.Duration, error) {
	var n atomic.Int64
	var seq atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	errc := make(chan error, e.opt.Producers)
	var wg sync.WaitGroup
	for range e.opt.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := f(ctx, fmt.Sprintf("%s%d", prefix, seq.Add(1))); err != nil {
					errc <- err
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return 0, 0, err
	default:
	}
	return n.Load(), time.Since(start), nil
}
