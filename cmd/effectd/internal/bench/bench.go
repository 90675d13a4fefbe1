package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/migrations"
	"github.com/effectd/effectd/providers/sandbox"
)

// Options select the scenarios and their sizes.
type Options struct {
	Binary      string        // the effectd binary run as `serve`
	Scenarios   []string      // drain, live, slow, producer, memory, startup, soak, scale, citus, citus-scale, breakdown
	Events      int           // drain: backlog size
	Producers   int           // concurrent producer connections
	Rate        int           // live: events offered per second
	Duration    time.Duration // live and producer: how long to offer
	SlowLatency time.Duration // slow: provider latency per call
	SlowEvents  int
	Concurrency int      // in-flight calls per instance (drain, live)
	SlowConc    int      // in-flight calls per instance (slow)
	MemEvents   int      // memory: backlog drained while resident memory is sampled
	Durable     bool     // fsync and synchronous_commit on (default off: see docs/performance.md)
	PGSettings  []string // extra name=value settings of the bench's PostgreSQL, applied last
	Keep        bool     // keep the data directory
	Profile     string   // directory for CPU profiles of each effectd serve run

	StartupEvents int // startup: backlog waiting when serve is started
	StartupRuns   int // startup: how many starts

	SoakRate      int           // soak: events offered per second
	SoakDuration  time.Duration // soak: how long
	SoakRetention time.Duration // soak: how long terminal rows are kept before the pruner deletes them
	SoakInterval  time.Duration // soak: one line per interval [1m]; shorter only in tests

	ScaleRows int // scale: retained intents at the larger size (the smaller is a tenth)
	ScaleRuns int // scale: calls of each read per size; the median is printed

	CitusScaleRows int // citus-scale: retained intents at the larger size (the smaller is a tenth)

	BreakdownEvents int           // breakdown: backlog drained (its live part runs at Rate for Duration)
	BreakdownScrape time.Duration // breakdown: when set, serve's /metrics is scraped at this interval during the drain
}

const secret = "whsec_ZWZmZWN0ZC1iZW5jaC1zZWNyZXQta2V5LTEyMzQ1Ng=="

// env is what every scenario shares: one PostgreSQL server and the sandbox.
type env struct {
	opt     Options
	out     io.Writer
	pg      *localpg.Server
	dir     string
	sandbox *sandbox.Server
	hookURL string
	seq     int
	dbYAML  string // the YAML's database section, when config writes one (citus)
	// onCall, when set, sees every call reaching the sandbox: its webhook-id
	// and when it arrived, before the receiver handles it.
	onCall atomic.Pointer[func(key string, at time.Time)]
	// serveProfile, when set, is where each serve started writes its CPU
	// profile, whatever Options.Profile says (breakdown's drain).
	serveProfile string
}

// Run runs the chosen scenarios and writes their figures to out.
func Run(ctx context.Context, opt Options, out io.Writer) error {
	opt.StartupEvents = cmp.Or(opt.StartupEvents, 20000)
	opt.StartupRuns = cmp.Or(opt.StartupRuns, 3)
	opt.SoakRate = cmp.Or(opt.SoakRate, 1500)
	opt.SoakDuration = cmp.Or(opt.SoakDuration, 20*time.Minute)
	opt.SoakRetention = cmp.Or(opt.SoakRetention, 2*time.Minute)
	opt.SoakInterval = cmp.Or(opt.SoakInterval, time.Minute)
	opt.ScaleRuns = cmp.Or(opt.ScaleRuns, 21)
	opt.CitusScaleRows = cmp.Or(opt.CitusScaleRows, 1_000_000)
	opt.BreakdownEvents = cmp.Or(opt.BreakdownEvents, 100_000)
	dir, err := os.MkdirTemp("", "effectd-bench-")
	if err != nil {
		return err
	}
	if !opt.Keep {
		defer os.RemoveAll(dir)
	}
	os.Chmod(dir, 0o755) // the postgres user must reach pg/ inside it when running as root
	settings := []string{"max_wal_size=4GB", "checkpoint_timeout=30min"}
	if slices.Contains(opt.Scenarios, "breakdown") {
		// Only then: the extension costs every statement a little.
		settings = append(settings, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all")
	}
	settings = append(settings, opt.PGSettings...)
	pg, err := localpg.Start(ctx, filepath.Join(dir, "pg"), localpg.Options{Fast: !opt.Durable, Settings: settings})
	if err != nil {
		return err
	}
	defer pg.Stop()
	sb := sandbox.New(sandbox.Options{WebhookSecret: secret})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e := &env{opt: opt, out: out, pg: pg, dir: dir, sandbox: sb, hookURL: "http://" + ln.Addr().String() + "/hooks/bench"}
	srv := &http.Server{Handler: e.observe(sb.Handler())}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(out, "effectd bench: %d cores, %s, PostgreSQL %s (fsync %s), sandbox webhook receiver on loopback\n\n",
		runtime.NumCPU(), runtime.Version(), pgVersion(ctx, pg), map[bool]string{true: "on", false: "off"}[opt.Durable])
	for _, s := range opt.Scenarios {
		var err error
		switch s {
		case "drain":
			err = e.drain(ctx, opt.Events, false)
		case "memory":
			err = e.drain(ctx, opt.MemEvents, true)
		case "live":
			err = e.live(ctx)
		case "slow":
			err = e.slow(ctx)
		case "producer":
			err = e.producer(ctx)
		case "startup":
			err = e.startup(ctx)
		case "soak":
			err = e.soak(ctx)
		case "scale":
			err = e.scale(ctx)
		case "citus":
			err = e.citus(ctx)
		case "citus-scale":
			err = e.citusScale(ctx)
		case "breakdown":
			err = e.breakdown(ctx)
		default:
			err = fmt.Errorf("unknown scenario %q (want drain, live, slow, producer, memory, startup, soak, scale, citus, citus-scale, breakdown)", s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		fmt.Fprintln(out)
	}
	return nil
}

func pgVersion(ctx context.Context, pg *localpg.Server) string {
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return "?"
	}
	defer conn.Close(ctx)
	var v string
	conn.QueryRow(ctx, `SHOW server_version`).Scan(&v)
	return v
}

// observe passes every request to h after telling onCall, if set, about it.
func (e *env) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := e.onCall.Load(); f != nil {
			(*f)(r.Header.Get(standardwebhooks.HeaderWebhookID), time.Now())
		}
		h.ServeHTTP(w, r)
	})
}

// database creates a fresh, migrated database and returns its URL and a pool.
func (e *env) database(ctx context.Context) (string, *pgxpool.Pool, error) {
	e.seq++
	name := fmt.Sprintf("bench_%d", e.seq)
	conn, err := pgx.Connect(ctx, e.pg.URL("postgres"))
	if err != nil {
		return "", nil, err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	conn.Close(ctx)
	if err != nil {
		return "", nil, err
	}
	url := e.pg.URL(name)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "", nil, err
	}
	cfg.MaxConns = int32(max(e.opt.Producers, 4) + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		pool.Close()
		return "", nil, err
	}
	return url, pool, nil
}

// fresh creates a migrated database with the bench channel registered at
// concurrency (policy as config takes it), and returns its URL, a pool the
// caller closes, and the YAML's path.
func (e *env) fresh(ctx context.Context, concurrency int, policy string) (url string, pool *pgxpool.Pool, cfg string, err error) {
	if url, pool, err = e.database(ctx); err != nil {
		return "", nil, "", err
	}
	if cfg, err = e.config(ctx, url, concurrency, policy); err != nil {
		pool.Close()
		return "", nil, "", err
	}
	return url, pool, cfg, nil
}

// config writes a one-channel YAML for the webhook receiver and registers it
// with `effectd migrate`, so producers can enqueue before the dispatcher starts.
// policy holds extra policy fields, such as ", retention: 1h".
func (e *env) config(ctx context.Context, dbURL string, concurrency int, policy string) (string, error) {
	path := filepath.Join(e.dir, fmt.Sprintf("effectd-%d.yaml", e.seq))
	yaml := fmt.Sprintf(`channels:
  bench:
    provider: webhook
    webhook: { url: %q, secret_env: BENCH_WEBHOOK_SECRET, timeout: 30s }
    policy: { concurrency: %d, lease: 60s, in_doubt: resend%s }
`, e.hookURL, concurrency, policy) + e.dbYAML
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, e.opt.Binary, "migrate", "--config", path)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "BENCH_WEBHOOK_SECRET="+secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("effectd migrate: %w: %s", err, out)
	}
	return path, nil
}

// instance is a running `effectd serve`.
type instance struct {
	addr    string // the admin API's address, as serve printed it
	cmd     *exec.Cmd
	exec    time.Time // just before the process was started
	started time.Time // when it printed that the dispatcher runs
	peakKB  int64
	stopMem chan struct{}
	memDone chan struct{}
}

// serve starts `effectd serve` on dbURL and returns once its dispatcher runs.
func (e *env) serve(ctx context.Context, dbURL, cfg string, sampleMemory bool) (*instance, error) {
	return e.serveAt(ctx, dbURL, cfg, "127.0.0.1:0", sampleMemory)
}

// serveAt is serve with the admin API on addr.
func (e *env) serveAt(ctx context.Context, dbURL, cfg, addr string, sampleMemory bool) (*instance, error) {
	args := []string{"serve", "--config", cfg, "--addr", addr, "--insecure-no-auth", "--log-level", "error"}
	if e.serveProfile != "" {
		args = append(args, "--cpuprofile", e.serveProfile)
	} else if e.opt.Profile != "" {
		args = append(args, "--cpuprofile", filepath.Join(e.opt.Profile, fmt.Sprintf("serve-%d.pprof", e.seq)))
	}
	cmd := exec.CommandContext(ctx, e.opt.Binary, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "BENCH_WEBHOOK_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	execAt := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var apiAddr string
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "effectd: admin API on "); ok {
				once.Do(func() {
					apiAddr, _, _ = strings.Cut(rest, " ")
					close(ready)
				})
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("effectd serve did not start within 30s")
	}
	in := &instance{addr: apiAddr, cmd: cmd, exec: execAt, started: time.Now(), stopMem: make(chan struct{}), memDone: make(chan struct{})}
	go func() {
		defer close(in.memDone)
		if !sampleMemory {
			return
		}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := rssKB(cmd.Process.Pid); kb > in.peakKB {
				in.peakKB = kb
			}
			select {
			case <-in.stopMem:
				return
			case <-t.C:
			}
		}
	}()
	return in, nil
}

// stop sends SIGTERM and waits for the drain.
func (in *instance) stop() error {
	close(in.stopMem)
	<-in.memDone
	if kb := peakKB(in.cmd.Process.Pid); kb > in.peakKB {
		in.peakKB = kb
	}
	in.cmd.Process.Signal(os.Interrupt)
	return in.cmd.Wait()
}

// rssKB reads the resident set of pid from /proc (0 when unavailable).
func rssKB(pid int) int64 { return procStatus(pid, "VmRSS:") }

// peakKB reads the peak resident set of pid from /proc.
func peakKB(pid int) int64 { return procStatus(pid, "VmHWM:") }

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// waitApplied polls the sandbox until want effects were applied or the deadline passes.
func (e *env) waitApplied(want int, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		n, _ := e.sandbox.Ledger.Count("webhook")
		if n >= want {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Now(), fmt.Errorf("only %d of %d effects applied within %s", n, want, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// integrity counts, for the committed events, those never applied (lost) and
// applications beyond the first (duplicates).
func (e *env) integrity(prefix string, committed map[string]bool) (lost, dups int) {
	applied := map[string]int{}
	for _, eff := range e.sandbox.Ledger.Snapshot("webhook").Effects {
		if strings.HasPrefix(eff.Key, "bench:"+prefix) {
			applied[strings.TrimPrefix(eff.Key, "bench:")] = eff.Applied
		}
	}
	for ev := range committed {
		switch n := applied[ev]; {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
		}
	}
	for ev := range applied {
		if !committed[ev] {
			dups++ // applied but never committed
		}
	}
	return lost, dups
}
