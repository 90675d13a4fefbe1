package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// breakdownStatements is how many of the costliest statements each phase's
// table lists by name; the others are summed on one line.
const breakdownStatements = 14

// phase is what one part of the breakdown measured: the CPU each process
// spent and what PostgreSQL's statements did, for count effects.
type phase struct {
	name    string
	per     string // what one of count is: "intent enqueued", "effect"
	count   int
	pg      map[string]time.Duration // by kind of PostgreSQL process
	serve   time.Duration            // effectd serve, when it ran
	self    time.Duration            // this process: producers, the sandbox receiver
	stmts   []stmtStat
	elapsed time.Duration
	scrapes int // /metrics scraped during the phase (Options.BreakdownScrape)
}

// meter measures a phase: the CPU of PostgreSQL's processes and of this
// process from begin to end, and pg_stat_statements reset at begin.
type meter struct {
	conn       *pgx.Conn
	db         string
	postmaster int
	pg         pgSnapshot
	self       time.Duration
	at         time.Time
}

func (m *meter) begin(ctx context.Context) error {
	if err := resetStatements(ctx, m.conn); err != nil {
		return err
	}
	m.pg, m.self, m.at = samplePG(m.postmaster), procCPU(os.Getpid()), time.Now()
	return nil
}

// end closes the phase begun last; servePID, when not 0, is effectd serve's
// process, started within the phase.
func (m *meter) end(ctx context.Context, p *phase, servePID int) error {
	if servePID != 0 {
		p.serve = procCPU(servePID)
	}
	p.pg = pgDelta(m.pg, samplePG(m.postmaster))
	p.self = procCPU(os.Getpid()) - m.self
	p.elapsed = time.Since(m.at)
	var err error
	p.stmts, err = readStatements(ctx, m.conn, m.db)
	return err
}

// breakdown: where each microsecond goes. A backlog of BreakdownEvents is
// enqueued (CPU and statements of the producers' phase), then drained by one
// effectd serve (CPU by process, statements, and serve's CPU profile by
// feature), then a live load at Rate for Duration on the same database is
// split into stages by the timestamps rows and attempts keep.
func (e *env) breakdown(ctx context.Context) error {
	url, pool, cfg, err := e.fresh(ctx, e.opt.Concurrency, "")
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := e.newMeter(ctx, url)
	if err != nil {
		return err
	}
	defer m.conn.Close(ctx)
	enq, drain, prof, err := e.breakdownDrain(ctx, m, url, pool, cfg)
	if err != nil {
		return err
	}
	arrived := &arrivals{at: map[string]time.Time{}}
	see := arrived.see
	e.onCall.Store(&see)
	lv, err := e.liveInto(ctx, url, pool, cfg)
	e.onCall.Store(nil)
	if err != nil {
		return err
	}
	if lv.lost+lv.dups > 0 {
		return fmt.Errorf("live: lost %d, duplicates %d", lv.lost, lv.dups)
	}
	stages, recorded, err := liveByStage(ctx, pool, lv, arrived)
	if err != nil {
		return err
	}
	e.printBreakdown(enq, drain, prof, lv, stages, recorded)
	return nil
}

// newMeter connects to the statistics and finds the postmaster.
func (e *env) newMeter(ctx context.Context, url string) (*meter, error) {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pm, err := postmasterPID(filepath.Join(e.pg.Dir, "data"))
	if err != nil {
		return nil, fmt.Errorf("the bench's postmaster: %w", err)
	}
	conn, err := e.statsConn(ctx)
	if err != nil {
		return nil, err
	}
	return &meter{conn: conn, db: pc.Database, postmaster: pm}, nil
}

// breakdownDrain enqueues the backlog and drains it with one effectd serve
// profiled, each a phase.
func (e *env) breakdownDrain(ctx context.Context, m *meter, url string, pool *pgxpool.Pool, cfg string) (enq, drain phase, prof profileSummary, err error) {
	n := e.opt.BreakdownEvents
	prefix := fmt.Sprintf("breakdown%d-", e.seq)
	enq = phase{name: "enqueue", per: "intent enqueued", count: n + (n+19)/20}
	if err = m.begin(ctx); err != nil {
		return
	}
	committed, _, err := e.backlog(ctx, pool, prefix, n)
	if err != nil {
		return
	}
	if err = m.end(ctx, &enq, 0); err != nil {
		return
	}
	drain = phase{name: "drain", per: "effect", count: len(committed)}
	profile := filepath.Join(cmp.Or(e.opt.Profile, e.dir), fmt.Sprintf("breakdown-drain-%d.pprof", e.seq))
	e.serveProfile = profile
	defer func() { e.serveProfile = "" }()
	before, _ := e.sandbox.Ledger.Count("webhook")
	if err = m.begin(ctx); err != nil {
		return
	}
	in, err := e.serve(ctx, url, cfg, false)
	if err != nil {
		return
	}
	scrapes := scrapeMetrics(ctx, in.addr, e.opt.BreakdownScrape)
	_, err = e.waitApplied(before+len(committed), 10*time.Minute)
	if err == nil {
		err = m.end(ctx, &drain, in.cmd.Process.Pid)
	}
	if n, serr := scrapes.end(); serr != nil && err == nil {
		err = fmt.Errorf("scraping /metrics: %w", serr)
	} else {
		drain.scrapes = n
	}
	if serr := in.stop(); serr != nil && err == nil {
		err = fmt.Errorf("effectd serve: %w", serr)
	}
	if err != nil {
		return
	}
	if lost, dup := e.integrity(prefix, committed); lost+dup > 0 {
		err = fmt.Errorf("drain: lost %d, duplicates %d", lost, dup)
		return
	}
	prof, err = summarizeProfile(profile)
	return
}

// us is d per one of n, in µs.
func us(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(max(n, 1))
}

// printBreakdown writes the breakdown's tables.
func (e *env) printBreakdown(enq, drain phase, prof profileSummary, lv lived, stages []stage, recorded int) {
	w := e.out
	fmt.Fprintf(w, "breakdown: %d events (+5%% redelivered) enqueued by %d producers in %.2fs, drained by 1 effectd serve (concurrency %d, claim batch 256) in %.2fs = %.0f effects/s; lost 0, duplicates 0\n",
		e.opt.BreakdownEvents, e.opt.Producers, enq.elapsed.Seconds(), e.opt.Concurrency, drain.elapsed.Seconds(), float64(drain.count)/drain.elapsed.Seconds())
	if e.opt.BreakdownScrape > 0 {
		fmt.Fprintf(w, "toggle: serve's /metrics scraped every %s during the drain, %d times\n", e.opt.BreakdownScrape, drain.scrapes)
	}
	fmt.Fprintf(w, "\n### CPU by process, µs per intent enqueued and per effect drained (/proc, user + system; PostgreSQL kinds under a 10 ms tick in both left out)\n\n")
	printProcessCPU(w, enq, drain)
	for _, p := range []phase{enq, drain} {
		fmt.Fprintf(w, "\n### PostgreSQL statements in the %s, per %s (pg_stat_statements, track = all)\n\n", p.name, p.per)
		printStatements(w, p)
	}
	fmt.Fprintf(w, "\n### effectd serve CPU by feature, µs per effect drained (its CPU profile, start to stop)\n\n")
	printProfile(w, prof, drain.count)
	fmt.Fprintf(w, "\n### Live latency by stage, ms: %d events at %d/s for %s on the same database, %d of them recorded\n\n",
		lv.n, e.opt.Rate, e.opt.Duration, recorded)
	printStages(w, stages)
	fmt.Fprintf(w, "\nNot recorded anywhere: the wake-up (NOTIFY heard) apart from the claim's start, the claim's commit, and the completion's commit.\n")
}

// printProcessCPU writes the CPU by process of both phases.
func printProcessCPU(w io.Writer, enq, drain phase) {
	fmt.Fprintf(w, "| process | µs per intent enqueued | µs per effect drained |\n|---|---:|---:|\n")
	row := func(name string, a, b time.Duration) {
		fmt.Fprintf(w, "| %s | %.1f | %.1f |\n", name, us(a, enq.count), us(b, drain.count))
	}
	fmt.Fprintf(w, "| effectd serve | not running | %.1f |\n", us(drain.serve, drain.count))
	var pgA, pgB time.Duration
	for _, k := range pgKindOrder(enq.pg, drain.pg) {
		pgA, pgB = pgA+enq.pg[k], pgB+drain.pg[k]
		if enq.pg[k] == 0 && drain.pg[k] == 0 && k != "client backends" && k != pgExited {
			continue // a process that used less than a clock tick in both
		}
		row("PostgreSQL: "+k, enq.pg[k], drain.pg[k])
	}
	row("PostgreSQL, all processes", pgA, pgB)
	row("bench process (producers; the sandbox receiver)", enq.self, drain.self)
	row("total", enq.serve+pgA+enq.self, drain.serve+pgB+drain.self)
}

// pgKindOrder lists the kinds of PostgreSQL processes either phase saw,
// client backends first, then by name.
func pgKindOrder(a, b map[string]time.Duration) []string {
	var out []string
	for _, m := range []map[string]time.Duration{a, b} {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, func(x, y string) int {
		rank := func(s string) string {
			if s == "client backends" {
				return "0"
			}
			return "1" + s
		}
		return strings.Compare(rank(x), rank(y))
	})
	return out
}

// printStatements writes a phase's costliest statements, the others summed,
// and the top-level statements' total.
func printStatements(w io.Writer, p phase) {
	fmt.Fprintf(w, "| statement | level | calls per 1,000 | exec µs | rows | shared hits | shared reads | dirtied | WAL bytes |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(label, level string, s stmtStat) {
		n := float64(max(p.count, 1))
		fmt.Fprintf(w, "| %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f |\n", label, level,
			float64(s.calls)*1000/n, s.execMS*1000/n, float64(s.rows)/n, float64(s.hit)/n, float64(s.read)/n, float64(s.dirtied)/n, s.walBytes/n)
	}
	var rest, top stmtStat
	others := 0
	for i, s := range p.stmts {
		if s.toplevel {
			top = addStat(top, s)
		}
		if i < breakdownStatements {
			row(s.label, map[bool]string{true: "top", false: "nested"}[s.toplevel], s)
			continue
		}
		rest = addStat(rest, s)
		others++
	}
	row(fmt.Sprintf("the %d other statements", others), "both", rest)
	row("all top-level statements (nested ones are inside them)", "top", top)
}

func addStat(a, b stmtStat) stmtStat {
	a.calls += b.calls
	a.execMS += b.execMS
	a.rows += b.rows
	a.hit += b.hit
	a.read += b.read
	a.dirtied += b.dirtied
	a.walBytes += b.walBytes
	return a
}

// printProfile writes serve's CPU by bucket, and allocation and system calls
// across the buckets.
func printProfile(w io.Writer, s profileSummary, effects int) {
	fmt.Fprintf(w, "| bucket | µs per effect | share |\n|---|---:|---:|\n")
	share := func(d time.Duration) float64 {
		if s.total == 0 {
			return 0
		}
		return 100 * float64(d) / float64(s.total)
	}
	for _, b := range bucketOrder() {
		fmt.Fprintf(w, "| %s | %.1f | %.1f%% |\n", b, us(s.buckets[b], effects), share(s.buckets[b]))
	}
	fmt.Fprintf(w, "| total sampled | %.1f | 100%% |\n", us(s.total, effects))
	fmt.Fprintf(w, "| across the buckets: memory allocation (runtime.mallocgc on the stack) | %.1f | %.1f%% |\n", us(s.allocation, effects), share(s.allocation))
	fmt.Fprintf(w, "| across the buckets: system calls (syscall on the stack) | %.1f | %.1f%% |\n", us(s.syscalls, effects), share(s.syscalls))
}

// printStages writes each stage's p50 and p99.
func printStages(w io.Writer, stages []stage) {
	fmt.Fprintf(w, "| stage | p50 | p99 | from → to |\n|---|---:|---:|---|\n")
	for _, s := range stages {
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s |\n", s.name, s.q(.50), s.q(.99), s.from)
	}
}
