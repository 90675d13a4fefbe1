package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage"
)

// scaleRead is one read an operator or Prometheus makes, with its budget at
// the larger size (issue: every read flat with a billion retained intents).
type scaleRead struct {
	name   string
	path   string
	budget time.Duration
	body   string // POSTed when set
}

// scaleReads are the reads the scale scenario times. Each list filter is
// chosen to be hard at volume: a status 3 rows hold among millions, a window
// that matches nothing, a search that must find one row.
func scaleReads() []scaleRead {
	since := url.QueryEscape(time.Now().Add(-30 * time.Minute).Format(time.RFC3339))
	old := time.Now().Add(-100 * 24 * time.Hour)
	from, until := url.QueryEscape(old.Format(time.RFC3339)), url.QueryEscape(old.Add(time.Hour).Format(time.RFC3339))
	const ms = time.Millisecond
	return []scaleRead{
		{"/metrics", "/metrics", 100 * ms, ""},
		{"stats", "/v1/stats", 100 * ms, ""},
		{"channels", "/v1/channels", 100 * ms, ""},
		{"one channel", "/v1/channels/sms", 100 * ms, ""},
		{"list: first page", "/v1/intents", 250 * ms, ""},
		{"list: IN_DOUBT (3 rows)", "/v1/intents?status=IN_DOUBT", 250 * ms, ""},
		{"list: FAILED of one channel", "/v1/intents?status=FAILED&channel=pay", 250 * ms, ""},
		{"list: SENT of one channel", "/v1/intents?status=SENT&channel=sms", 250 * ms, ""},
		{"list: undelivered", "/v1/intents?delivery=undelivered", 250 * ms, ""},
		{"list: undelivered of a channel with none", "/v1/intents?delivery=undelivered&channel=bench", 250 * ms, ""},
		{"list: since 30 minutes ago", "/v1/intents?since=" + since, 250 * ms, ""},
		{"list: a window that matches none", "/v1/intents?since=" + from + "&until=" + until, 250 * ms, ""},
		{"list: delivered in a window of none", "/v1/intents?delivery=delivered&since=" + from + "&until=" + until, 250 * ms, ""},
		{"list: event_id", "/v1/intents?event_id=s-124", 250 * ms, ""},
		{"search: event id", "/v1/intents?q=s-321", 50 * ms, ""},
		{"search: idempotency key", "/v1/intents?q=sms:s-323", 50 * ms, ""},
		{"search: provider reference", "/v1/intents?q=ref-325", 50 * ms, ""},
		{"one intent with its attempts", "/v1/intents/327", 250 * ms, ""},
		{"provider events: first page", "/v1/provider-events", 250 * ms, ""},
		{"provider events: one channel", "/v1/provider-events?channel=sms", 250 * ms, ""},
		{"provider events: a channel with none", "/v1/provider-events?channel=pay", 250 * ms, ""},
		{"provider events: orphans", "/v1/provider-events?orphan=true", 250 * ms, ""},
		{"bulk snapshot: FAILED of one channel", "/v1/intents/bulk", 2000 * ms,
			`{"action":"retry","filter":{"status":"FAILED","channel":"pay"},"reason":"scale bench"}`},
		// the console's pages with their charts (loadChartHistory), as a browser gets them
		{"console: overview with charts, 1h", "/ui/?range=1h", 250 * ms, ""},
		{"console: overview with charts, 7d", "/ui/?range=7d", 250 * ms, ""},
		{"console: channel sms with charts, 24h", "/ui/channels/sms?range=24h", 250 * ms, ""},
		{"console: channel sms with charts, 7d", "/ui/channels/sms?range=7d", 250 * ms, ""},
	}
}

// scale loads ScaleRows/10 retained intents, checks that /v1/stats counts
// them, times every read, loads up to ScaleRows and does the same again, and
// prints each read's median at both sizes, their ratio, and the ratio of the
// fastest calls. Then, on top of the history against an empty database: a
// backlog of Events drained, two rounds each, and the live load's p99,
// liveRounds each; and the four oldest days' partitions dropped while the live
// load runs, in a round for each of pruneHorizons. It fails when a read breaks
// its budget at the larger size, when a read grows with history (judged on
// the fastest calls, which a busy machine disturbs least: more than 1.5 times,
// unless under 2 ms), when the drain or the live p99 on history is more than
// 1.25 times worse, or when the prune removes fewer than 5 times the live rate
// a second or raises the live p99 more than 1.25 times.
func (e *env) scale(ctx context.Context) error {
	return e.onEmptyLayout(ctx, func(url string, pool *pgxpool.Pool, cfg string) error {
		sizes := []int{max(e.opt.ScaleRows/10, 1000), e.opt.ScaleRows}
		medians, err := e.timeAtSizes(ctx, url, pool, cfg, sizes, singleNode)
		if err != nil {
			return err
		}
		broken := e.printReads(sizes, medians, nil)
		p99, drainBroken, err := e.dispatchOnHistory(ctx, url, pool, cfg, sizes[1])
		if err != nil {
			return err
		}
		broken = append(broken, drainBroken...)
		pruneBroken, err := e.pruneWhileLive(ctx, url, pool, cfg, p99)
		if err != nil {
			return err
		}
		broken = append(broken, pruneBroken...)
		if len(broken) > 0 {
			return fmt.Errorf("%d figures broke their budget or grew with history: %v", len(broken), broken)
		}
		return nil
	})
}

// history is how timeAtSizes loads one layout's history: load adds n intents
// after from, of final in all; describe says what the load of added intents,
// up to n, did in took; skipped are the reads the layout does not serve.
type history struct {
	load     func(ctx context.Context, pool *pgxpool.Pool, from, n, final int) error
	describe func(ctx context.Context, pool *pgxpool.Pool, n, added int, took time.Duration) string
	skipped  map[string]string
}

// singleNode is the history of one PostgreSQL.
var singleNode = history{
	load: loadHistory,
	describe: func(ctx context.Context, pool *pgxpool.Pool, n, added int, took time.Duration) string {
		return fmt.Sprintf("scale: %d retained intents loaded (%d added in %.1fs, with VACUUM ANALYZE); %s",
			n, added, took.Seconds(), tableSizes(ctx, pool))
	},
}

// timeAtSizes loads h up to each of sizes in turn and, at each, starts serve,
// times every read and checks that /v1/stats counts what was loaded.
func (e *env) timeAtSizes(ctx context.Context, url string, pool *pgxpool.Pool, cfg string, sizes []int, h history) ([]map[string]timing, error) {
	medians := make([]map[string]timing, len(sizes))
	loaded := 0
	for i, n := range sizes {
		start := time.Now()
		if err := h.load(ctx, pool, loaded, n-loaded, sizes[len(sizes)-1]); err != nil {
			return nil, fmt.Errorf("loading %d intents: %w", n, err)
		}
		fmt.Fprintln(e.out, h.describe(ctx, pool, n, n-loaded, time.Since(start)))
		loaded = n
		if err := loadChartHistory(ctx, pool); err != nil { // before serve's fold loop writes rollups too
			return nil, err
		}
		in, err := e.serve(ctx, url, cfg, false)
		if err != nil {
			return nil, err
		}
		medians[i], err = timeReads(ctx, in.addr, e.opt.ScaleRuns, h.skipped)
		if err == nil {
			err = checkCounts(ctx, in.addr, n)
		}
		in.stop()
		if err != nil {
			return nil, err
		}
	}
	return medians, nil
}

// printReads prints each read's median at both sizes, their ratio and the
// ratio of the fastest calls, and returns the reads over budget or growing.
// A read in skipped is printed as skipped, with why.
func (e *env) printReads(sizes []int, medians []map[string]timing, skipped map[string]string) (broken []string) {
	fmt.Fprintf(e.out, "  %-42s %10s %10s %6s %9s %8s\n", "read (median of "+fmt.Sprint(e.opt.ScaleRuns)+")",
		fmt.Sprintf("%dk", sizes[0]/1000), fmt.Sprintf("%dk", sizes[1]/1000), "ratio", "min ratio", "budget")
	for _, r := range scaleReads() {
		if why, ok := skipped[r.name]; ok {
			fmt.Fprintf(e.out, "  %-42s skipped: %s\n", r.name, why)
			continue
		}
		if medians[0][r.name].failed != "" || medians[1][r.name].failed != "" {
			broken = append(broken, r.name)
			fmt.Fprintf(e.out, "  %-42s %s · %s  OVER BUDGET\n", r.name, medians[0][r.name], medians[1][r.name])
			continue
		}
		a, b := medians[0][r.name].median, medians[1][r.name].median
		ratio := float64(b) / float64(max(a, 1))
		aMin, bMin := medians[0][r.name].min, medians[1][r.name].min
		minRatio := float64(bMin) / float64(max(aMin, 1))
		verdict := ""
		if b > r.budget {
			verdict = "  OVER BUDGET"
		} else if minRatio > 1.5 && bMin > 2*time.Millisecond {
			verdict = "  GROWS"
		}
		if verdict != "" {
			broken = append(broken, r.name)
		}
		fmt.Fprintf(e.out, "  %-42s %8.1fms %8.1fms %5.2fx %8.2fx %6dms%s\n", r.name, ms(a), ms(b), ratio, minRatio, r.budget.Milliseconds(), verdict)
	}
	return broken
}

// dispatchOnHistory drains a backlog on top of the history against an empty
// table, two rounds each, and runs the live load, liveRounds each,
// alternating; it prints both and returns the live p99 on history (the median
// of the rounds) and the figures more than 1.25 times worse on history (the
// drains' mean rate, the live rounds' median p99).
func (e *env) dispatchOnHistory(ctx context.Context, url string, pool *pgxpool.Pool, cfg string, retained int) (p99 float64, broken []string, err error) {
	var onHistory, onEmpty []float64
	for range 2 {
		r, err := e.drainInto(ctx, url, pool, cfg, "scale-drain", e.opt.Events)
		if err != nil {
			return 0, nil, fmt.Errorf("drain on %d retained: %w", retained, err)
		}
		onHistory = append(onHistory, r.rate())
		if err := e.onEmptyLayout(ctx, func(url string, pool *pgxpool.Pool, cfg string) (err error) {
			r, err = e.drainInto(ctx, url, pool, cfg, "scale-empty", e.opt.Events)
			return err
		}); err != nil {
			return 0, nil, fmt.Errorf("drain on an empty table: %w", err)
		}
		onEmpty = append(onEmpty, r.rate())
	}
	slowdown := (onEmpty[0] + onEmpty[1]) / (onHistory[0] + onHistory[1])
	verdict := ""
	if slowdown > 1.25 {
		verdict = "  SLOWER"
		broken = append(broken, "drain")
	}
	fmt.Fprintf(e.out, "  drain of %d, two rounds: %.0f · %.0f intents/s on %d retained, %.0f · %.0f on an empty table of the same partitions: %.2fx (at most 1.25x)%s\n",
		e.opt.Events, onHistory[0], onHistory[1], retained, onEmpty[0], onEmpty[1], slowdown, verdict)

	var p99History, p99Empty []float64
	var seconds []string
	var vacuumed []string
	for i := range liveRounds {
		// The drains (and the round before) leave dead row versions in
		// today's partition, where the claim steps over their intents_due
		// entries until a vacuum removes them; the empty table is a fresh
		// database at every round. The history is vacuumed first, as
		// autovacuum keeps a running deployment's hot partition.
		took, err := vacuumIntents(ctx, pool)
		if err != nil {
			return 0, nil, err
		}
		vacuumed = append(vacuumed, took.Round(10*time.Millisecond).String())
		r, err := e.liveInto(ctx, url, pool, cfg)
		if err != nil {
			return 0, nil, fmt.Errorf("live on %d retained: %w", retained, err)
		}
		p99History = append(p99History, r.q(.99))
		seconds = append(seconds, fmt.Sprintf("    round %d on %d retained: %s\n      %s", i+1, retained, msList(r.bySecond), r.stages))
		if err := e.onEmptyLayout(ctx, func(url string, pool *pgxpool.Pool, cfg string) (err error) {
			r, err = e.liveInto(ctx, url, pool, cfg)
			return err
		}); err != nil {
			return 0, nil, fmt.Errorf("live on an empty table: %w", err)
		}
		p99Empty = append(p99Empty, r.q(.99))
		seconds = append(seconds, fmt.Sprintf("    round %d on an empty table: %s\n      %s", i+1, msList(r.bySecond), r.stages))
	}
	p99 = median(p99History)
	liveRatio := p99 / median(p99Empty)
	verdict = ""
	if liveRatio > 1.25 {
		verdict = "  SLOWER"
		broken = append(broken, "live p99")
	}
	fmt.Fprintf(e.out, "  live at %d/s for %s, p99 commit → provider, %d rounds each: %s ms on %d retained, %s ms on an empty table of the same partitions; medians %.1f against %.1f ms: %.2fx (at most 1.25x)%s\n",
		e.opt.Rate, e.opt.Duration, liveRounds, dotList(p99History), retained, dotList(p99Empty), p99, median(p99Empty), liveRatio, verdict)
	fmt.Fprintf(e.out, "  live p99 of the events committed in each second, ms (today's intents of the history vacuumed, and a checkpoint, before each round on it: %s):\n%s\n",
		strings.Join(vacuumed, ", "), strings.Join(seconds, "\n"))
	return p99, broken, nil
}

// historyLayout gives a fresh database the history's layout: the channels
// pay and sms beside the bench's, and a partition of each table for each of
// the 15 days before today and today (the 3 days ahead are migrate's): 19 of
// each on one PostgreSQL, as a deployment keeping 15 days has whatever it
// holds; in the distributed mode the days go into week partitions.
func historyLayout(ctx context.Context, pool *pgxpool.Pool) error {
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"pay": "stripe", "sms": "twilio"}); err != nil {
		return err
	}
	return harnessdb.DayPartitions(ctx, pool, 15)
}

// onEmptyLayout runs f on a fresh database with the history's layout and no
// rows (historyLayout): where the scale scenario loads its history, and what
// the dispatch figures on the history are compared with. Every statement that reads or writes intents opens and locks
// each of its partitions, so a table of 19 partitions costs more at every
// enqueue, claim and completion than the 4 a fresh database has, rows or
// none (effectd.enqueue: 245 µs against 166 µs in pg_stat_statements under
// pgbench); the comparison is of the rows.
func (e *env) onEmptyLayout(ctx context.Context, f func(url string, pool *pgxpool.Pool, cfg string) error) error {
	url, pool, cfg, err := e.fresh(ctx, e.opt.Concurrency, "")
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := historyLayout(ctx, pool); err != nil {
		return err
	}
	return f(url, pool, cfg)
}

// liveRounds is how many live rounds the scale scenario runs on the history
// and on an empty table, alternating; their medians are compared. On two
// cores the live load keeps the machine 95% busy, and one round's p99 (its
// hundredth slowest event) follows whatever else held a core in it: the
// rounds of one side varied by up to five times in one run.
const liveRounds = 3

// pruneHorizons are the retentions the prune rounds lower the history to,
// one round each: the two oldest days' partitions dropped in the first, the
// next day's in each round after it.
var pruneHorizons = []time.Duration{13 * 24 * time.Hour, 12 * 24 * time.Hour, 11 * 24 * time.Hour}

// median is the median of v (the mean of the middle two when even).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// dotList formats figures in ms, one decimal, separated by " · ".
func dotList(v []float64) string {
	return strings.ReplaceAll(msList(v), " ", " · ")
}

// pruneWhileLive runs a prune round for each of pruneHorizons: the partitions
// that horizon expires dropped while the live load runs on the history. It
// prints each round, the rate of all of them, and the median of their live
// p99s against p99History, and says whether that broke the budget.
func (e *env) pruneWhileLive(ctx context.Context, url string, pool *pgxpool.Pool, cfg string, p99History float64) (broken []string, err error) {
	var total pruned
	var p99s []float64
	for i, horizon := range pruneHorizons {
		// as before the live rounds it is compared with (dispatchOnHistory)
		if _, err := vacuumIntents(ctx, pool); err != nil {
			return nil, err
		}
		pr, r, err := e.liveWhilePruning(ctx, url, pool, cfg, horizon)
		if err != nil {
			return nil, err
		}
		p99s = append(p99s, r.q(.99))
		total.partitions += pr.partitions
		total.rows += pr.rows
		total.took += pr.took
		fmt.Fprintf(e.out, "  prune round %d (retention %s): %d partitions (%d intents) dropped in %.2fs while live ran at %d/s with p99 %.1f ms\n    p99 of the events committed in each second, ms, dropping from %.1f s to %.1f s: %s\n",
			i+1, days(horizon), pr.partitions, pr.rows, pr.took.Seconds(), e.opt.Rate, r.q(.99),
			pr.at.Sub(r.start).Seconds(), pr.at.Add(pr.took).Sub(r.start).Seconds(), msList(r.bySecond))
	}
	pruneRatio := median(p99s) / p99History
	rate := float64(total.rows) / total.took.Seconds()
	verdict := ""
	if pruneRatio > 1.25 || rate < 5*float64(e.opt.Rate) || total.partitions == 0 {
		verdict = "  TOO SLOW OR TOO COSTLY"
		broken = append(broken, "prune")
	}
	fmt.Fprintf(e.out, "  prune: %d partitions (%d intents, the four oldest days, in %d rounds) dropped in %.2fs = %.0f rows/s (at least %d: 5× the live rate); live p99 while dropping, median of the rounds, %.1f ms: %.2fx its median without (at most 1.25x)%s\n",
		total.partitions, total.rows, len(pruneHorizons), total.took.Seconds(), rate, 5*e.opt.Rate, median(p99s), pruneRatio, verdict)
	return broken, nil
}

// days formats d in whole days.
func days(d time.Duration) string { return fmt.Sprintf("%d days", int(d/(24*time.Hour))) }

// pruned is what liveWhilePruning removed: partitions dropped, the intents
// they held, and how long it took.
type pruned struct {
	partitions int
	names      []string // the partitions dropped
	rows       int64
	at         time.Time // when the first step began
	took       time.Duration
	err        error
}

// liveWhilePruning runs the live load on the history while the pruner's own
// statements drop the partitions that horizon expires, as a retention
// lowered to it would (the pruner lists what expired, checks that no
// intents partition holds a live or recent row, and drops them in one
// transaction), a third of the load's duration after the round begins
// (serve's start and the warm-up included: 2–3 s into the measured load of
// 10 s here); and returns what it dropped, in how long.
func (e *env) liveWhilePruning(ctx context.Context, url string, pool *pgxpool.Pool, cfg string, horizon time.Duration) (pruned, lived, error) {
	// Counted before the load, not during it: a count reads every row of the
	// partition, on the cores the load and the pruner share.
	rows, err := expiredRows(ctx, pool, horizon)
	if err != nil {
		return pruned{}, lived{}, err
	}
	done := make(chan pruned, 1)
	pctx, stop := context.WithCancel(ctx)
	go func() {
		select {
		case <-time.After(e.opt.Duration / 3):
		case <-pctx.Done():
			done <- pruned{err: pctx.Err()}
			return
		}
		done <- dropExpired(pctx, storage.New(effectdtype.SingleNode, pool, storage.Leases{}), horizon, rows)
	}()
	r, err := e.liveInto(ctx, url, pool, cfg)
	p := <-done
	stop()
	if err == nil && p.err != nil {
		err = fmt.Errorf("prune: %w", p.err)
	}
	return p, r, err
}

// expiredRows counts the intents of each intents partition that ended at
// least horizon ago, by name.
func expiredRows(ctx context.Context, pool *pgxpool.Pool, horizon time.Duration) (map[string]int64, error) {
	expired, err := retentiondb.ExpiredPartitions(ctx, pool, horizon)
	if err != nil {
		return nil, err
	}
	rows := map[string]int64{}
	for _, part := range expired {
		if part.Parent != "intents" {
			continue
		}
		if rows[part.Name], err = harnessdb.PartitionRows(ctx, pool, part.Name); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// dropExpired drops the expired partitions through the pruner's own
// storage.Engine.DropExpiredPartitions, adding up the intents of those it drops
// from rows (expiredRows).
func dropExpired(ctx context.Context, store storage.Engine, horizon time.Duration, rows map[string]int64) (p pruned) {
	start := time.Now()
	p.at = start
	dropped, _, err := store.DropExpiredPartitions(ctx, horizon)
	p.partitions, p.took, p.err = len(dropped), time.Since(start), err
	for _, part := range dropped {
		p.names = append(p.names, part.Name)
		if part.Parent == "intents" {
			p.rows += rows[part.Name]
		}
	}
	return p
}

// tableSizes says how large the tables that grow with history are, heap and
// indexes apart.
func tableSizes(ctx context.Context, pool *pgxpool.Pool) string {
	return sizesOf(ctx, pool, func(string) bool { return false })
}

// sizesOf is tableSizes, with the tables distributed says are distributed
// read on the Citus workers.
func sizesOf(ctx context.Context, pool *pgxpool.Pool, distributed func(table string) bool) string {
	var out []string
	for _, t := range []string{"intents", "attempts", "provider_events"} {
		size := harnessdb.TableSize
		if distributed(t) {
			size = harnessdb.DistributedTableSize
		}
		heap, idx, err := size(ctx, pool, t)
		if err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("%s %.2f GB + %.2f GB indexes", t, float64(heap)/(1<<30), float64(idx)/(1<<30)))
	}
	return strings.Join(out, ", ")
}

// checkCounts fails unless /v1/stats counts the n intents loaded as settled
// (SENT and FAILED) and the 3 IN_DOUBT: a fast count must still be right.
func checkCounts(ctx context.Context, base string, n int) error {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/stats", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var stats struct {
		Totals struct {
			Counts map[string]int64 `json:"counts"`
		} `json:"totals"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		return fmt.Errorf("/v1/stats: %w", err)
	}
	c := stats.Totals.Counts
	if c["SENT"]+c["FAILED"] != int64(n) || c["IN_DOUBT"] != 3 {
		return fmt.Errorf("/v1/stats counts %v, want %d SENT or FAILED and 3 IN_DOUBT", c, n)
	}
	return nil
}

// timing is a read's median and fastest call, or what it answered when a call
// failed (failed: the status and how long it took).
type timing struct {
	median, min time.Duration
	failed      string
}

// String is the median, or what a failed call answered.
func (t timing) String() string {
	if t.failed != "" {
		return t.failed
	}
	return fmt.Sprintf("%.1fms", ms(t.median))
}

// timeReads calls each read but those in skip runs times against the admin
// API at base, after one call not timed, and returns each read's median and
// fastest.
func timeReads(ctx context.Context, base string, runs int, skip map[string]string) (map[string]timing, error) {
	client, err := readsClient(ctx, base)
	if err != nil {
		return nil, err
	}
	out := map[string]timing{}
	for _, r := range scaleReads() {
		if _, ok := skip[r.name]; ok {
			continue
		}
		times := make([]time.Duration, 0, runs)
		for i := range runs + 1 {
			method, body := "GET", io.Reader(nil)
			if r.body != "" {
				method, body = "POST", strings.NewReader(r.body)
			}
			req, err := http.NewRequestWithContext(ctx, method, base+r.path, body)
			if err != nil {
				return nil, err
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode/100 != 2 {
				// printed as what it answered, and counted as over budget
				out[r.name] = timing{failed: fmt.Sprintf("answered %d after %.0fms", resp.StatusCode, ms(took))}
				break
			}
			if i > 0 {
				times = append(times, took)
			}
		}
		if out[r.name].failed != "" {
			continue
		}
		slices.Sort(times)
		out[r.name] = timing{median: times[len(times)/2], min: times[0]}
	}
	return out, nil
}

// loadHistory adds n settled intents after the first `from` into a history of
// final (harnessdb.LoadHistory), folds their counts as serve's fold loop does, and
// ends with VACUUM ANALYZE, as autovacuum would have by then, and a CHECKPOINT.
func loadHistory(ctx context.Context, pool *pgxpool.Pool, from, n, final int) error {
	if err := harnessdb.LoadHistory(ctx, pool, harnessdb.History{From: from, N: n, Final: final}); err != nil {
		return err
	}
	if err := readdb.FoldSettledCounts(ctx, pool); err != nil {
		return err
	}
	if err := harnessdb.VacuumHistory(ctx, pool); err != nil {
		return err
	}
	// The load leaves gigabytes of dirty pages; the next checkpoint would flush
	// them while the reads are timed.
	return checkpoint(ctx, pool)
}

// checkpoint runs a CHECKPOINT on pool, then flushes the machine's dirty
// pages to disk. With fsync off a checkpoint only hands its pages to the
// operating system, whose writeback then ran during the reads timed next:
// 445,812 blocks written in the second the 10 M reads began, both cores busy.
func checkpoint(ctx context.Context, pool *pgxpool.Pool) error {
	if err := harnessdb.Checkpoint(ctx, pool); err != nil {
		return err
	}
	syscall.Sync()
	return nil
}

// msList formats figures in ms, one decimal, separated by spaces.
func msList(v []float64) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(out, " ")
}

// vacuumIntents vacuums the intents partitions holding rows created in the
// last hour (today's, where the drains left their dead row versions), then
// checkpoints so that the pages it and the drains dirtied are not written
// during the round; and says how long that took.
func vacuumIntents(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	start := time.Now()
	rows, err := pool.Query(ctx, `SELECT DISTINCT tableoid::regclass::text FROM effectd.intents WHERE created_at > now() - interval '1 hour'`)
	if err != nil {
		return 0, fmt.Errorf("vacuum before a live round: %w", err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("vacuum before a live round: %w", err)
	}
	for _, part := range parts {
		if _, err := pool.Exec(ctx, `VACUUM `+part); err != nil {
			return 0, fmt.Errorf("vacuum before a live round: %w", err)
		}
	}
	if err := checkpoint(ctx, pool); err != nil {
		return 0, fmt.Errorf("checkpoint before a live round: %w", err)
	}
	return time.Since(start), nil
}
