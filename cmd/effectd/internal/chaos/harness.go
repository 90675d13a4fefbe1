package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// Config configures a chaos run. Zero fields take the defaults in brackets.
type Config struct {
	Binary       string        // the effectd binary to run as `serve` (required)
	Events       int           // events to produce [1500]
	Instances    int           // effectd serve processes [2]
	Duration     time.Duration // fault phase; producers spread events over 75% of it [40s]
	Seed         uint64        // drives the event plan and the fault schedule
	Faults       []string      // fault names (see AllFaults); nil injects none
	DrainTimeout time.Duration // how long the instances may take to settle every intent [3m]
	Lease        time.Duration // every channel's lease [2s]
	Out          io.Writer     // progress, fault log and the table [io.Discard]
	Channels     []Channel     // the channels to run [Channels]
	Dir          string        // work directory (PostgreSQL, logs); "" makes a temporary one, removed at the end
	// Sync makes the failover's standby synchronous: the primary's commits
	// wait until the standby has applied them (synchronous_commit=remote_apply).
	Sync bool
	// ReplicationLag holds the primary's WAL this long on its way to the
	// standby (see link); the failover cuts the link as it kills the primary.
	ReplicationLag time.Duration
	// Citus runs on a Citus cluster on loopback (a coordinator and
	// CitusWorkers workers) in effectd's distributed mode: the producers
	// write producer.orders, distributed by bucket, and enqueue with the
	// event's bucket; pgrestart restarts a worker. Not with failover.
	Citus   bool
	Buckets int // the producer's buckets on Citus [32]
	// AfterDrain, if set, runs once every intent is settled, while the
	// instances still serve: a test's own checks of the running system.
	AfterDrain func(context.Context, Inspection)
	// Actors adds the randomized checker's actors (actors.go): producers at
	// every isolation level, concurrent redeliveries, a moved clock, a
	// rolled-back batch of BatchEvents, operators through the admin API,
	// retention rounds on one PostgreSQL (retention.go), the ingress with
	// callbacks and Stripe events (ingress.go), an id reused before a
	// callback (reuse.go), and sweeps after the drain; the report then judges every invariant
	// (Report.Invariants). `effectd check` sets it, with CheckChannels.
	Actors bool
	Batch  int // with actors: the rolled-back batch's events [BatchEvents]
}

// storage is the storage mode the run's effectd runs in: the harness chose it.
func (cfg Config) storage() effectdtype.Storage {
	if cfg.Citus {
		return effectdtype.Citus
	}
	return effectdtype.SingleNode
}

// CheckChannels are the channels of a run with Actors: Channels, and a
// Twilio channel whose in-doubt sends wait for an operator (IN_DOUBT).
var CheckChannels = append(slices.Clone(Channels),
	Channel{Name: "sms-manual", Provider: "twilio", InDoubt: "manual", LookupFallback: "manual"})

// pgSettings are the PostgreSQL settings of the run beyond localpg's. With
// actors, the lock table is about as large as a default server's (64 locks
// a connection, 100 connections: 6,400 slots; here 20 × 322), so that an
// enqueue taking a lock per event fails on the batch as it would there. The
// table grows into spare shared memory past its slots: one transaction took
// 12,000 locks here and was refused 16,000, so a batch must be larger.
func (h *harness) pgSettings() []string {
	if h.cfg.Actors {
		return []string{"max_locks_per_transaction=20"}
	}
	return nil
}

// Channels are the channels of a run, one per provider and in-doubt policy.
var Channels = []Channel{
	{Name: "hook", Provider: "webhook", InDoubt: "resend", LookupFallback: "manual"},
	{Name: "refund", Provider: "stripe", InDoubt: "lookup", LookupFallback: "manual"},
	{Name: "sms-lookup", Provider: "twilio", InDoubt: "lookup", LookupFallback: "resend"},
	{Name: "sms-resend", Provider: "twilio", InDoubt: "resend", LookupFallback: "manual"},
	{Name: "sms-skip", Provider: "twilio", InDoubt: "skip", LookupFallback: "manual"},
}

// Sandbox credentials: they open nothing but the in-process sandbox.
const (
	hookSecret = "whsec_ZWZmZWN0ZC1jaGFvcy1zZWNyZXQta2V5LTEyMzQ="
	twilioSID  = "AC00000000000000000000000000000000"
)

// Run produces events under faults, drains, and checks. It returns the
// checker's report; an error means the run itself could not be carried out.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Events = cmp.Or(cfg.Events, 1500)
	cfg.Instances = cmp.Or(cfg.Instances, 2)
	cfg.Duration = cmp.Or(cfg.Duration, 40*time.Second)
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, 3*time.Minute)
	cfg.Lease = cmp.Or(cfg.Lease, 2*time.Second)
	cfg.Buckets = cmp.Or(cfg.Buckets, 32)
	cfg.Batch = cmp.Or(cfg.Batch, BatchEvents)
	if len(cfg.Channels) == 0 {
		cfg.Channels = Channels
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Binary == "" {
		return nil, errors.New("chaos: no effectd binary")
	}
	if cfg.Citus && slices.Contains(cfg.Faults, FaultFailover) {
		return nil, errors.New("chaos: a Citus run has no failover (its nodes have no standbys)")
	}
	h := &harness{cfg: cfg, start: time.Now()}
	defer h.close()
	if err := h.setup(ctx); err != nil {
		return nil, err
	}
	return h.run(ctx)
}

// harness is one run's processes and resources.
type harness struct {
	cfg   Config
	start time.Time
	outMu sync.Mutex

	dir       string
	removeDir bool
	pg        *localpg.Server // the primary: after a failover, the promoted standby; on Citus, the coordinator
	citus     *localpg.Citus  // the cluster of a Citus run; nil otherwise
	restarts  int             // workers restarted (Citus)
	dsn       string
	fo        *failover // nil unless the run fails over
	pool      *pgxpool.Pool
	sbSrv     *http.Server
	sb        *sandbox.Server
	instances []*instance
	hist      History          // the actors' operations (Config.Actors)
	old       map[int64]target // the old intents retention may drop (retention.go)
	ingress   *ingressProxy    // the instances' ingress behind one address (Config.Actors; ingress.go)
}

// note writes one timestamped line of the run's log.
func (h *harness) note(format string, args ...any) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	fmt.Fprintf(h.cfg.Out, "chaos %6.1fs  %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

// setup makes the work directory and starts PostgreSQL, the sandbox and the
// instances on a migrated database.
func (h *harness) setup(ctx context.Context) error {
	if err := h.workDir(); err != nil {
		return err
	}
	if err := h.startPostgres(ctx); err != nil {
		return err
	}
	sandboxURL, err := h.startSandbox()
	if err != nil {
		return err
	}
	if h.cfg.Actors {
		if err := h.startIngressProxy(); err != nil {
			return err
		}
		if err := h.registerStripeEvents(ctx, sandboxURL); err != nil {
			return err
		}
	}
	env, err := h.serveEnv(sandboxURL)
	if err != nil {
		return err
	}
	if err := h.migrate(ctx, env); err != nil {
		return err
	}
	if err := h.oldDays(ctx); err != nil {
		return err
	}
	if err := h.startInstances(ctx, env); err != nil {
		return err
	}
	if h.fo != nil {
		h.note("setup: PostgreSQL primary on %d, %s standby on %d, sandbox %s, %d instances, logs in %s",
			h.pg.Port, h.fo.mode(), h.fo.standby.Port, sandboxURL, len(h.instances), h.dir)
		return nil
	}
	if h.citus != nil {
		h.note("setup: Citus coordinator on %d, workers on %d and %d, %d buckets, sandbox %s, %d instances, logs in %s",
			h.pg.Port, h.citus.Workers[0].Port, h.citus.Workers[1].Port, h.cfg.Buckets, sandboxURL, len(h.instances), h.dir)
		return nil
	}
	h.note("setup: PostgreSQL on %d, sandbox %s, %d instances, logs in %s", h.pg.Port, sandboxURL, len(h.instances), h.dir)
	return nil
}

// workDir makes the run's directory, a temporary one unless cfg.Dir names it.
func (h *harness) workDir() error {
	h.dir = h.cfg.Dir
	if h.dir == "" {
		d, err := os.MkdirTemp("", "effectd-chaos-")
		if err != nil {
			return err
		}
		h.dir, h.removeDir = d, true
	}
	// The postgres user (when running as root) must reach dir/pg.
	return os.Chmod(h.dir, 0o755)
}

// startPostgres starts one cluster, or a primary and a standby when the run
// fails over, and creates the effectd database.
func (h *harness) startPostgres(ctx context.Context) error {
	if h.cfg.Citus {
		return h.startCitus(ctx)
	}
	if slices.Contains(h.cfg.Faults, FaultFailover) {
		if err := h.setupPair(ctx); err != nil {
			return err
		}
	} else {
		var err error
		if h.pg, err = localpg.Start(ctx, filepath.Join(h.dir, "pg"), localpg.Options{Fast: true, Settings: h.pgSettings()}); err != nil {
			return err
		}
		h.dsn = h.pg.URL("effectd")
	}
	return createDatabase(ctx, h.pg.URL("postgres"), "effectd")
}

// startSandbox serves the sandbox on a loopback port and returns its URL.
func (h *harness) startSandbox() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: sandbox: %w", err)
	}
	h.sb = sandbox.New(sandbox.Options{WebhookSecret: hookSecret})
	h.sbSrv = &http.Server{Handler: h.sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go h.sbSrv.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}

// serveEnv writes the instances' configuration and returns their environment:
// the database, the configuration, the sandbox credentials, and this
// process's environment but for effectd's own variables.
func (h *harness) serveEnv(sandboxURL string) ([]string, error) {
	cfgPath := filepath.Join(h.dir, "effectd.yaml")
	if err := os.WriteFile(cfgPath, []byte(configYAML(sandboxURL, h.ingressURL(), h.cfg.Lease, h.cfg.Channels)+h.citusYAML()), 0o644); err != nil {
		return nil, err
	}
	env := []string{
		"DATABASE_URL=" + h.dsn, "EFFECTD_CONFIG=" + cfgPath, "EFFECTD_LOG_LEVEL=info",
		"STRIPE_API_KEY=sk_test_effectd_chaos", "TWILIO_ACCOUNT_SID=" + twilioSID, "TWILIO_AUTH_TOKEN=chaos",
		"CHAOS_HOOK_SECRET=" + hookSecret, "CHAOS_STRIPE_WHSEC=" + stripeWebhookSecret,
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EFFECTD_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	return env, nil
}

// migrate opens the pool, runs effectd migrate and creates the producers'
// table; on Citus the producers' table comes first, since migrate
// co-locates effectd's tables with it.
func (h *harness) migrate(ctx context.Context, env []string) error {
	pcfg, err := pgxpool.ParseConfig(h.dsn)
	if err != nil {
		return err
	}
	pcfg.MaxConns = 12
	if h.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return err
	}
	if h.citus != nil {
		if _, err := h.pool.Exec(ctx, citusProduceSchema); err != nil {
			return fmt.Errorf("chaos: the producers' table on Citus: %w", err)
		}
	}
	mctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	migrate := exec.CommandContext(mctx, h.cfg.Binary, "migrate")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: effectd migrate: %v: %s", err, out)
	}
	if h.citus != nil {
		return nil
	}
	_, err = h.pool.Exec(ctx, produceSchema)
	return err
}

// startInstances starts cfg.Instances effectd serve processes with env.
func (h *harness) startInstances(ctx context.Context, env []string) error {
	for n := 1; n <= h.cfg.Instances; n++ {
		p := &instance{n: n, bin: h.cfg.Binary, env: env, note: h.note, withIngress: h.ingress != nil,
			logPath: filepath.Join(h.dir, fmt.Sprintf("instance-%d.log", n))}
		h.instances = append(h.instances, p)
		p.mu.Lock()
		err := p.start(ctx)
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if h.ingress != nil {
		h.ingress.instances = h.instances
	}
	return nil
}

// ingressURL is the public address of the instances' ingress, "" without one.
func (h *harness) ingressURL() string {
	if h.ingress == nil {
		return ""
	}
	return h.ingress.url
}

// smsSender is the sender number of the i-th channel: each Twilio channel
// has its own, as the sweep expects (it lists the messages of the channel's
// sender and judges them against that channel's intents).
func smsSender(i int) string { return fmt.Sprintf("+1555900%04d", i) }

// configYAML is the shared configuration: short leases so that faults turn
// into in-doubt rows quickly, small backoff, and max_attempts high enough that
// fault storms never exhaust an intent (FAILED would hide what the checker
// looks for). With an ingress (its public address), each Twilio channel has
// its status callbacks and each Stripe channel its events sent there.
func configYAML(sandboxURL, ingress string, lease time.Duration, chans []Channel) string {
	var b strings.Builder
	b.WriteString("channels:\n")
	for i, c := range chans {
		fmt.Fprintf(&b, "  %s:\n    provider: %s\n", c.Name, c.Provider)
		switch {
		case c.Provider == "webhook":
			fmt.Fprintf(&b, "    webhook: { url: %q, secret_env: CHAOS_HOOK_SECRET }\n", sandboxURL+"/hooks/chaos")
		case c.Provider == "stripe" && ingress != "":
			fmt.Fprintf(&b, "    stripe: { base_url: %q, webhook_secret_env: CHAOS_STRIPE_WHSEC }\n", sandboxURL)
		case c.Provider == "stripe":
			fmt.Fprintf(&b, "    stripe: { base_url: %q }\n", sandboxURL)
		case c.Provider == "twilio" && ingress != "":
			fmt.Fprintf(&b, "    twilio: { from: %q, base_url: %q, status_callback: %q }\n", smsSender(i), sandboxURL, ingress+"/ingress/twilio/"+c.Name)
		case c.Provider == "twilio":
			fmt.Fprintf(&b, "    twilio: { from: %q, base_url: %q }\n", smsSender(i), sandboxURL)
		}
		fmt.Fprintf(&b, "    policy: { max_attempts: 1000, lease: %s, lookup_grace: %s, backoff: { base: 100ms, max: 2s }, in_doubt: %s, lookup_fallback: %s, concurrency: 16 }\n",
			lease, lookupGrace(lease), c.InDoubt, c.LookupFallback)
	}
	return b.String()
}

// run produces events under faults, drains, sweeps after a failover, stops
// the instances, and checks.
func (h *harness) run(ctx context.Context) (*Report, error) {
	cfg := h.cfg
	h.note("seed %d: %d events, %d instances, %s of faults: %s", cfg.Seed, cfg.Events, cfg.Instances, cfg.Duration,
		cmp.Or(strings.Join(cfg.Faults, ","), "none"))
	log, counts := h.produceUnderFaults(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := h.drain(ctx); err != nil {
		return nil, err
	}
	h.note("drained")
	h.inspect(ctx)
	// the sweep an operator runs after a failover, while the instances serve
	var sweeps []effectdtype.SweepReport
	var sweepFailed []Violation
	if h.fo != nil && !h.cfg.Actors { // with actors, checkSweeps judges every sweep
		sweeps, sweepFailed = h.sweep(ctx, h.start)
	}
	var actorSweeps []Violation
	if h.cfg.Actors {
		intents, err := loadIntents(ctx, h.pool)
		if err != nil {
			return nil, err
		}
		if h.ingress != nil {
			actorSweeps = h.reuseID(ctx, h.sb.Ledger.Snapshot(""))
		}
		actorSweeps = append(actorSweeps, h.checkSweeps(ctx, intents, h.sb.Ledger.Snapshot(""), log.Events())...)
	}
	crashes := 0
	for _, p := range h.instances {
		if err := p.terminate(20 * time.Second); err != nil {
			h.note("%v", err)
		}
		crashes += p.crashes
	}

	rep, err := h.judge(ctx, log, sweeps, sweepFailed, actorSweeps)
	if err != nil {
		return nil, err
	}
	if crashes > 0 {
		rep.Violations = append(rep.Violations, Violation{Rule: fmt.Sprintf("effectd exited by itself %d times", crashes), Channel: "*", Keys: []string{"see instance logs in " + h.dir}})
		h.removeDir = false
	}
	if !rep.OK() {
		h.removeDir = false // keep the logs and the cluster's data for the post-mortem
	}
	h.outMu.Lock()
	fmt.Fprintf(cfg.Out, "\nseed %d, %d events, %d instances, %s, faults %v\n", cfg.Seed, cfg.Events, cfg.Instances, cfg.Duration, sortedCounts(counts))
	if h.fo != nil {
		fmt.Fprintf(cfg.Out, "replication %s\n", h.fo.mode())
	}
	if h.citus != nil {
		fmt.Fprintf(cfg.Out, "Citus: a coordinator and %d workers, %d buckets (pgrestart restarts a worker)\n", len(h.citus.Workers), cfg.Buckets)
	}
	rep.Faults = counts
	rep.Print(cfg.Out)
	h.outMu.Unlock()
	return rep, nil
}

// produceUnderFaults runs the producers over the planned deliveries while the
// injector injects faults for cfg.Duration. It returns the producers' log and
// how many faults of each kind were injected.
func (h *harness) produceUnderFaults(ctx context.Context) (*Log, map[string]int) {
	cfg := h.cfg
	deliveries := plan(rand.New(rand.NewPCG(cfg.Seed, 1)), cfg.Events, cfg.Duration*3/4, cfg.Channels)
	log := newLog()
	faultCtx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	defer stopFaults()
	var actors sync.WaitGroup
	groups := singles(deliveries)
	if cfg.Actors {
		deliveries = planActors(rand.New(rand.NewPCG(cfg.Seed, 3)), deliveries)
		var cancels []cancelPlan
		groups, cancels = planVerbs(rand.New(rand.NewPCG(cfg.Seed, 9)), deliveries, h.buckets())
		defer newCanceller(ctx, h.pool, cancels, h.buckets(), log, &h.hist).wait()
		if h.retentionRuns() {
			if err := h.seedOld(ctx, log); err != nil {
				h.note("%v", err)
			} else {
				actors.Add(1)
				go func() {
					defer actors.Done()
					h.retention(ctx, // every round runs, past the fault phase if need be
						rand.New(rand.NewPCG(cfg.Seed, 7)), cfg.Duration*3/4)
				}()
			}
		}
		actors.Add(2)
		go func() { defer actors.Done(); h.operators(faultCtx) }()
		go func() { defer actors.Done(); h.batch(faultCtx, rand.New(rand.NewPCG(cfg.Seed, 5))) }()
	}
	defer actors.Wait()
	inj := &injector{rng: rand.New(rand.NewPCG(cfg.Seed, 2)), faults: cfg.Faults, lease: cfg.Lease,
		instances: h.instances, restartPG: h.restartPG, pgName: h.pgName(), sb: h.sb, note: h.note, window: cfg.Duration * 3 / 4}
	if h.fo != nil {
		inj.failover = h.failover
	}
	injected := make(chan struct{})
	go func() { inj.run(faultCtx, ctx); close(injected) }()
	produce(ctx, h.pool, groups, 8, h.buckets(), log)
	h.note("producers done: %d deliveries (%d in %d enqueue_many transactions), %d failed transactions retried",
		len(deliveries), log.batched, log.batches, log.errors)
	<-injected
	counts := inj.Counts()
	h.note("faults stopped: %v", counts)
	return log, counts
}

// drain keeps every instance running until every intent is final or settled,
// or cfg.DrainTimeout has passed.
func (h *harness) drain(ctx context.Context) error {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	lastNote := time.Now()
	for {
		for _, p := range h.instances {
			p.mu.Lock()
			err := p.ensure(ctx)
			p.mu.Unlock()
			if err != nil {
				return err
			}
		}
		pending, err := h.pendingCommits(ctx)
		open := 0
		if err == nil {
			open, err = harnessdb.CountOpen(ctx, h.pool)
		}
		if err == nil && open == 0 && pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			h.note("drain: %d intents still PENDING or SENDING, %d two-phase commits pending, after %s", open, pending, h.cfg.DrainTimeout)
			return nil
		}
		if time.Since(lastNote) > 10*time.Second {
			h.note("draining: %d intents PENDING or SENDING, %d two-phase commits pending (err %v)", open, pending, err)
			lastNote = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pendingCommits is, on Citus, how many two-phase commits the workers still
// hold prepared, once those whose coordinator recorded the commit are
// recovered (harnessdb.RecoverPrepared): a producer whose COMMIT returned
// while a worker went down before its COMMIT PREPARED has its intent hidden
// on that worker until then, delayed and not lost, and the run is not
// drained before the intent is visible and settled. Zero on one node.
func (h *harness) pendingCommits(ctx context.Context) (int, error) {
	if !h.cfg.Citus {
		return 0, nil
	}
	recovered, left, err := harnessdb.RecoverPrepared(ctx, h.pool)
	if err != nil {
		return 0, err
	}
	if recovered > 0 {
		h.note("drain: %d two-phase commits a worker held prepared recovered", recovered)
	}
	return recovered + left, nil
}

// judge checks the run against the sandbox's ledger; after a failover, with
// what it lost, and with the sweeps compared to the intents.
// With actors it adds the sweeps' verdicts (checkSweeps, made while the
// instances served), what the history shows, and the per-invariant summary.
func (h *harness) judge(ctx context.Context, log *Log, sweeps []effectdtype.SweepReport, sweepFailed []Violation, actorSweeps []Violation) (*Report, error) {
	ledger := h.sb.Ledger.Snapshot("")
	rep, err := h.check(ctx, log, ledger)
	if err != nil {
		return nil, err
	}
	intents, err := loadIntents(ctx, h.pool)
	if err != nil {
		return nil, err
	}
	if h.fo != nil && !h.cfg.Actors {
		rows, vs := compareSweeps(sweeps, intents, ledger, h.cfg.Channels, h.fo.sync)
		rep.Sweep = rows
		rep.Violations = append(rep.Violations, sweepFailed...)
		rep.Violations = append(rep.Violations, vs...)
	}
	if !h.cfg.Actors {
		return rep, nil
	}
	ops := h.hist.Ops()
	vs, err := judgeHistory(ctx, h.pool, ops, log.refusals(), intents)
	if err != nil {
		return nil, err
	}
	lost, err := judgeRetention(ctx, h.pool, h.old, ops, intents)
	if err != nil {
		return nil, err
	}
	vs = append(vs, lost...)
	cancels, err := judgeCancels(ctx, h.pool, log.Events(), ops, intents, ledger)
	if err != nil {
		return nil, err
	}
	vs = append(vs, cancels...)
	events, misapplied, err := judgeEvents(ctx, h.pool, intents, h.sb.Ledger.Snapshot(""))
	if err != nil {
		return nil, err
	}
	vs = append(vs, misapplied...)
	rep.Violations = append(append(rep.Violations, actorSweeps...), vs...)
	rep.Invariants = invariantRows(rep.Violations)
	rep.History, rep.Operations = summary(ops)+events, len(ops)
	return rep, nil
}

// check runs the checker, after a failover with what it lost.
func (h *harness) check(ctx context.Context, log *Log, ledger sandbox.Snapshot) (*Report, error) {
	if h.fo != nil {
		return h.checkFailover(ctx, log, ledger)
	}
	return check(ctx, h.pool, h.cfg.storage(), log.Events(), ledger, h.cfg.Channels, nil, decide(h.hist.Ops()))
}

func sortedCounts(m map[string]int) string {
	var parts []string
	for _, f := range append(slices.Clone(AllFaults), FaultFailover) {
		if m[f] > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", f, m[f]))
		}
	}
	return strings.Join(slices.Clip(parts), " ")
}

// restartPG stops PostgreSQL (fast: every connection is cut) and starts it
// again on the same port. It stops and starts rather than running pg_ctl
// restart, which without -l leaves the server holding the output pipe, so
// that the command never returns.
func (h *harness) restartPG() error {
	if h.citus != nil {
		return h.restartWorker()
	}
	if err := h.pg.Stop(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := localpg.Start(ctx, h.pg.Dir, localpg.Options{Port: h.pg.Port, Fast: true, Settings: h.pgSettings()})
	if err != nil {
		return err
	}
	h.pg = pg
	return nil
}

// close stops everything the run started, whatever state it is in.
func (h *harness) close() {
	for _, p := range h.instances {
		p.mu.Lock()
		if p.alive() {
			p.kill()
		}
		p.mu.Unlock()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.sbSrv != nil {
		h.sbSrv.Close()
	}
	h.ingress.close()
	if h.citus != nil {
		h.citus.Stop()
	} else if h.pg != nil {
		h.pg.Stop()
	}
	if h.fo != nil {
		h.fo.close()
	}
	if h.removeDir {
		os.RemoveAll(h.dir)
	} else if h.dir != "" {
		h.note("kept %s (logs, PostgreSQL data)", h.dir)
	}
}

// createDatabase creates name on the server.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}
