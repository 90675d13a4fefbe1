package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/storage"
)

// Config configures a Dispatcher. A zero field takes the Default constant
// named in brackets; New refuses a negative one, naming the field.
type Config struct {
	Channels []Channel
	Logger   *slog.Logger
	// Registerer receives the dispatcher's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// TracerProvider traces attempts, provider calls, lookups, settlements,
	// provider events and operator actions (docs/tracing.md); nil traces
	// nothing and costs nothing.
	TracerProvider trace.TracerProvider

	ClaimBatch        int           // most rows one claim takes, at most MaxClaimBatch [DefaultClaimBatch]
	Completers        int           // concurrent batched completion writers [DefaultCompleters]
	PollInterval      time.Duration // longest idle wait between claims when no NOTIFY arrives [DefaultPollInterval]
	ReconcileInterval time.Duration // how often expired leases are looked for [DefaultReconcileInterval]
	RefreshInterval   time.Duration // how often policies and pause flags are reread [DefaultRefreshInterval]
	PruneInterval     time.Duration // how often terminal rows past retention are deleted [DefaultPruneInterval]
	// DeliveryPollInterval is how often deliveries due for a poll are looked
	// for [DefaultDeliveryPollInterval].
	DeliveryPollInterval time.Duration
	// SettleLease is how long a reconciler holds a row it settles [twice the
	// longest channel lease (at least 1s), plus WriteTimeout].
	SettleLease  time.Duration
	WriteTimeout time.Duration // bound on writing a final outcome during shutdown [DefaultWriteTimeout]

	// Buckets is the distributed mode's bucket count (database.citus, as
	// migrations.Mode reads it from the database); 0 is single-node mode.
	// With it, the instances divide the buckets by leases, and claims,
	// completions and the reconciler's takes are single-shard statements of
	// the buckets this instance holds (docs/scale.md, "Buckets").
	Buckets int
	// BucketLease is how long a bucket's lease lasts unrenewed: how soon a
	// dead instance's buckets are served again [DefaultBucketLease].
	BucketLease time.Duration
}

// The values Config's zero fields take.
const (
	DefaultClaimBatch           = 256
	DefaultCompleters           = 2
	DefaultPollInterval         = 250 * time.Millisecond
	DefaultReconcileInterval    = time.Second
	DefaultRefreshInterval      = 2 * time.Second
	DefaultPruneInterval        = time.Minute
	DefaultDeliveryPollInterval = time.Second
	DefaultWriteTimeout         = 10 * time.Second
)

// MaxClaimBatch bounds Config.ClaimBatch: one claim locks that many rows in
// one statement, and the completion queue holds completionQueueBatches claims.
const MaxClaimBatch = 10000

// completionQueueBatches is how many full claims' outcomes wait for the
// completers before a worker that finished a call blocks.
const completionQueueBatches = 4

// settleLookupFloor is the least lookup time the default SettleLease allows
// for: the shortest lease a policy may have.
const settleLookupFloor = time.Second

// withDefaults returns c with its zero fields set to their defaults, or an
// error naming the first field that no default can mend.
func (c Config) withDefaults() (Config, error) {
	bad := func(field string, got any, want string) error {
		//lint:ignore ST1005 the message begins with the field's Go name, Config.<Field>
		return fmt.Errorf("Config.%s: %w %v: want %s", field, ErrInvalid, got, want)
	}
	if c.ClaimBatch < 0 || c.ClaimBatch > MaxClaimBatch {
		return c, bad("ClaimBatch", c.ClaimBatch, fmt.Sprintf("1 to %d, or 0 for %d", MaxClaimBatch, DefaultClaimBatch))
	}
	if c.Buckets < 0 {
		return c, bad("Buckets", c.Buckets, "at least 1, or 0 for single-node mode")
	}
	if c.Completers < 0 {
		return c, bad("Completers", c.Completers, fmt.Sprintf("at least 1, or 0 for %d", DefaultCompleters))
	}
	for _, f := range []struct {
		name     string
		value    *time.Duration
		fallback time.Duration // 0: computed below
	}{
		{"PollInterval", &c.PollInterval, DefaultPollInterval},
		{"ReconcileInterval", &c.ReconcileInterval, DefaultReconcileInterval},
		{"RefreshInterval", &c.RefreshInterval, DefaultRefreshInterval},
		{"PruneInterval", &c.PruneInterval, DefaultPruneInterval},
		{"DeliveryPollInterval", &c.DeliveryPollInterval, DefaultDeliveryPollInterval},
		{"WriteTimeout", &c.WriteTimeout, DefaultWriteTimeout},
		{"SettleLease", &c.SettleLease, 0},
		{"BucketLease", &c.BucketLease, DefaultBucketLease},
	} {
		if *f.value < 0 {
			want := "a positive duration, or 0 for the default"
			if f.fallback > 0 {
				want = fmt.Sprintf("a positive duration, or 0 for %v", f.fallback)
			}
			return c, bad(f.name, *f.value, want)
		}
		*f.value = cmp.Or(*f.value, f.fallback)
	}
	if c.Buckets > 0 && c.BucketLease < time.Second {
		return c, bad("BucketLease", c.BucketLease, "at least 1s, or 0 for "+DefaultBucketLease.String())
	}
	c.ClaimBatch = cmp.Or(c.ClaimBatch, DefaultClaimBatch)
	c.Completers = cmp.Or(c.Completers, DefaultCompleters)
	if c.SettleLease == 0 {
		// Long enough for a lookup (bounded by the lease) and its write; short
		// enough that a reconciler killed mid-settlement strands nothing for long.
		longest := settleLookupFloor
		for _, ch := range c.Channels {
			longest = max(longest, ch.Policy.Lease.D())
		}
		c.SettleLease = 2*longest + c.WriteTimeout
	}
	return c, nil
}

// Dispatcher claims due intents, calls providers and records outcomes.
// Start runs it; Stop drains it.
//
// It is a set of services that share its pool, channels, logger and metrics:
// the claimer hands claimed intents to the workers, whose outcomes the
// completers write; the listener, reconciler, refresher, pruner, poller and
// fold loop run beside them.
type Dispatcher struct {
	pool   *pgxpool.Pool
	held   *pgxpool.Pool // the dispatch statements' connections (heldconn.go), from Start to Stop
	cfg    Config
	log    *slog.Logger
	m      *metrics
	tracer trace.Tracer // nil: tracing is off (Config.TracerProvider)
	chans  []*channel
	byName map[string]*channel
	names  []string

	// Signals between the services; each holds at most one pending signal.
	wake   chan struct{} // the claimer should claim now: a NOTIFY, an unpause, a row back to PENDING
	slot   chan struct{} // a call finished: a channel may have room
	settle chan struct{} // a maybe-sent call wants settling now

	workers    *workers      // claim.go
	completers *completers   // complete.go
	claimer    *claimer      // claim.go
	listener   *listener     // listen.go
	reconciler *reconciler   // reconcile.go
	refresher  *refresher    // refresh.go
	pruner     *pruner       // prune.go
	poller     *poller       // poll.go
	foldLoop   *foldLoop     // counts.go
	sweeper    *sweeper      // sweep_schedule.go
	buckets    *bucketLeases // buckets.go; nil in single-node mode
	leaseLoops []service     // the bucket leases' service in the distributed mode, last to stop
	store      storage.Store // every statement that differs by storage mode

	started  bool
	stopOnce sync.Once
}

// New returns a Dispatcher for cfg.Channels. Call Register first so the
// database knows the channels. An invalid cfg returns an error naming the
// field.
func New(pool *pgxpool.Pool, cfg Config) (*Dispatcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("dispatcher.New: %w", err)
	}
	d := &Dispatcher{
		pool:   pool,
		cfg:    cfg,
		log:    cmp.Or(cfg.Logger, slog.Default()),
		m:      newMetrics(cfg.Registerer),
		byName: map[string]*channel{},
		wake:   make(chan struct{}, 1),
		slot:   make(chan struct{}, 1),
		settle: make(chan struct{}, 1),
	}
	for _, c := range cfg.Channels {
		if c.Provider == nil {
			return nil, fmt.Errorf("dispatcher.New: channel %q has no provider", c.Name)
		}
		if err := c.Policy.ValidateFor(c.Kind); err != nil {
			return nil, fmt.Errorf("dispatcher.New: channels.%s.%w", c.Name, err)
		}
		if w, ok := c.Provider.(KeyWindowed); ok && w.KeyWindow() != KeyWindow(c.Kind) {
			return nil, fmt.Errorf("dispatcher.New: channel %q: %w: its %s provider declares a %s key window, the dispatcher keeps %s for that kind (KeyWindow)",
				c.Name, ErrInvalid, c.Kind, w.KeyWindow(), KeyWindow(c.Kind))
		}
		if _, dup := d.byName[c.Name]; dup {
			return nil, fmt.Errorf("dispatcher.New: channel %q configured twice", c.Name)
		}
		ch := newChannel(c)
		d.m.addChannel(c.Name)
		d.chans = append(d.chans, ch)
		d.byName[c.Name] = ch
		d.names = append(d.names, c.Name)
	}
	for _, ch := range d.chans {
		if ch.Notify != nil && d.byName[ch.Notify.Channel] != nil {
			d.byName[ch.Notify.Channel].notifies = true
		}
	}
	if cfg.TracerProvider != nil {
		d.tracer = cfg.TracerProvider.Tracer(TracerName)
	}
	d.completers = newCompleters(d, cfg.Completers, cfg.ClaimBatch, completionQueueBatches*cfg.ClaimBatch)
	d.workers = newWorkers(d, d.completers.queue)
	d.claimer = &claimer{d: d, batch: cfg.ClaimBatch, idleWait: cfg.PollInterval}
	d.listener = &listener{d: d}
	d.reconciler = &reconciler{d: d, interval: cfg.ReconcileInterval}
	d.refresher = &refresher{d: d, interval: cfg.RefreshInterval}
	d.pruner = &pruner{d: d, interval: cfg.PruneInterval}
	d.poller = &poller{d: d, interval: cfg.DeliveryPollInterval}
	d.foldLoop = &foldLoop{d: d}
	d.sweeper = newSweeper(d)
	mode, leases := effectdtype.SingleNode, storage.Leases{Buckets: cfg.Buckets}
	if cfg.Buckets > 0 {
		mode = effectdtype.Citus
		d.buckets = newBucketLeases(pool, cfg.Buckets, cfg.BucketLease, nil, cfg.Registerer)
		d.buckets.log = d.logDB
		d.leaseLoops, leases.Owned = []service{d.buckets}, d.buckets.Owned
	}
	d.store = storage.New(mode, pool, leases)
	return d, nil
}

// loops are the services that run on their own, in the order Stop ends them:
// the claimer first, so that no call starts once Stop has begun.
func (d *Dispatcher) loops() []service {
	s := []service{d.claimer, d.listener, d.reconciler, d.refresher, d.pruner, d.poller, d.foldLoop, d.sweeper}
	// last: the bucket leases are given up once nothing claims any more
	return append(s, d.leaseLoops...)
}

// Start reads the channels' effective policies and starts dispatching. It
// returns once the dispatcher runs; Stop ends it.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.refresher.refresh(ctx); err != nil {
		return fmt.Errorf("dispatcher.Start: %w", err)
	}
	held, err := openHeld(ctx, d.pool, d.cfg)
	if err != nil {
		return fmt.Errorf("dispatcher.Start: %w", err)
	}
	d.held = held
	ctx = context.WithoutCancel(ctx) // the services run until Stop, not until ctx ends
	d.workers.Start(ctx)
	d.completers.Start(ctx)
	for _, s := range d.loops() {
		s.Start(ctx)
	}
	d.started = true
	return nil
}

// Stop stops claiming and the other loops, waits for in-flight calls until
// ctx ends, then cancels the rest (their outcome is recorded as maybe sent),
// and writes every outcome before it returns. It is safe to call more than
// once.
func (d *Dispatcher) Stop(ctx context.Context) error {
	var err error
	d.stopOnce.Do(func() {
		if !d.started {
			return
		}
		for _, s := range d.loops() {
			s.Stop()
		}
		err = d.workers.Stop(ctx)
		d.completers.Stop()
		d.held.Close()
	})
	return err
}
