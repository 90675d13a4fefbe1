package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/internal/query"
)

// Config configures a Dispatcher. Zero fields take the defaults in brackets.
type Config struct {
	Channels []Channel
	Logger   *slog.Logger
	// Registerer receives the dispatcher's metrics; nil registers nothing.
	Registerer prometheus.Registerer

	ClaimBatch        int           // most rows one claim takes [256]
	Completers        int           // concurrent batched completion writers [2]
	PollInterval      time.Duration // longest idle wait between claims when no NOTIFY arrives [250ms]
	ReconcileInterval time.Duration // how often expired leases are looked for [1s]
	RefreshInterval   time.Duration // how often policies and pause flags are reread [2s]
	PruneInterval     time.Duration // how often terminal rows past retention are deleted [1m]
	// DeliveryPollInterval is how often deliveries due for a poll are looked for [1s].
	DeliveryPollInterval time.Duration
	SettleLease          time.Duration // how long a reconciler holds a row it settles [twice the longest lease + WriteTimeout]
	WriteTimeout         time.Duration // bound on writing a final outcome during shutdown [10s]
}

// Dispatcher claims due intents, calls providers and records outcomes.
// Start runs it; Stop drains it.
type Dispatcher struct {
	pool    *pgxpool.Pool
	cfg     Config
	log     *slog.Logger
	m       *metrics
	chans   []*channel
	byName  map[string]*channel
	names   []string
	done    chan completion
	wake    chan struct{} // a NOTIFY arrived
	slot    chan struct{} // a call finished: a channel may have room
	settle  chan struct{} // a maybe-sent call wants settling now
	jobs    chan job      // hands a claimed intent to an idle worker
	quit    chan struct{} // closed by Stop: idle workers exit
	backoff func(p Policy, attempt int, retryAfter time.Duration) time.Duration

	beforeCall func(id int64, attempt int32) // tests: stall a worker between claim and call

	stopClaiming context.CancelFunc // ends the claim, reconcile, refresh and prune loops
	abandon      context.CancelFunc // cancels in-flight provider calls
	callCtx      context.Context
	loops        sync.WaitGroup
	calls        sync.WaitGroup
	completers   sync.WaitGroup
	stopOnce     sync.Once
}

// New returns a Dispatcher for cfg.Channels. Call Register first so the
// database knows the channels.
func New(pool *pgxpool.Pool, cfg Config) (*Dispatcher, error) {
	cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, 256)
	cfg.Completers = cmp.Or(cfg.Completers, 2)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 250*time.Millisecond)
	cfg.ReconcileInterval = cmp.Or(cfg.ReconcileInterval, time.Second)
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, 2*time.Second)
	cfg.PruneInterval = cmp.Or(cfg.PruneInterval, time.Minute)
	cfg.DeliveryPollInterval = cmp.Or(cfg.DeliveryPollInterval, time.Second)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, 10*time.Second)
	if cfg.SettleLease == 0 {
		// Long enough for a lookup (bounded by the lease) and its write; short
		// enough that a reconciler killed mid-settlement strands nothing for long.
		longest := time.Second
		for _, c := range cfg.Channels {
			longest = max(longest, c.Policy.Lease.D())
		}
		cfg.SettleLease = 2*longest + cfg.WriteTimeout
	}
	d := &Dispatcher{
		pool:    pool,
		cfg:     cfg,
		log:     cmp.Or(cfg.Logger, slog.Default()),
		m:       newMetrics(cfg.Registerer),
		byName:  map[string]*channel{},
		done:    make(chan completion, 4*cfg.ClaimBatch),
		wake:    make(chan struct{}, 1),
		slot:    make(chan struct{}, 1),
		settle:  make(chan struct{}, 1),
		jobs:    make(chan job),
		quit:    make(chan struct{}),
		backoff: jitteredBackoff,
	}
	for _, c := range cfg.Channels {
		if c.Provider == nil {
			return nil, fmt.Errorf("dispatcher.New: channel %q has no provider", c.Name)
		}
		if err := c.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("dispatcher.New: channels.%s.%w", c.Name, err)
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
	return d, nil
}

// Start reads the channels' effective policies and starts dispatching. It
// returns once the dispatcher runs; Stop ends it.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.refresh(ctx); err != nil {
		return fmt.Errorf("dispatcher.Start: %w", err)
	}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stopClaiming = stop
	d.callCtx, d.abandon = context.WithCancel(context.WithoutCancel(ctx))
	for range d.cfg.Completers {
		d.completers.Add(1)
		go d.completeLoop()
	}
	for _, loop := range []func(context.Context){d.listen, d.claimLoop, d.reconcileLoop, d.refreshLoop, d.pruneLoop, d.pollLoop} {
		d.loops.Add(1)
		go func() {
			defer d.loops.Done()
			loop(loopCtx)
		}()
	}
	return nil
}

// Stop stops claiming, waits for in-flight calls until ctx ends, then cancels
// the rest (their outcome is recorded as maybe sent), and writes every outcome
// before it returns. It is safe to call more than once.
func (d *Dispatcher) Stop(ctx context.Context) error {
	var err error
	d.stopOnce.Do(func() {
		if d.stopClaiming == nil {
			return
		}
		d.stopClaiming()
		d.loops.Wait()
		finished := make(chan struct{})
		go func() { d.calls.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-ctx.Done():
			d.log.Warn("shutdown deadline reached: abandoning in-flight calls", "error", ctx.Err())
			d.abandon()
			<-finished
			err = ctx.Err()
		}
		d.abandon()
		close(d.quit)
		close(d.done)
		d.completers.Wait()
	})
	return err
}

// refresh rereads every channel's policy and pause flag.
func (d *Dispatcher) refresh(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, query.Channels)
	if err != nil {
		return fmt.Errorf("read channels: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var name, kind string
		var registered, override []byte
		var paused bool
		if err := rows.Scan(&name, &kind, &registered, &override, &paused); err != nil {
			return fmt.Errorf("read channels: %w", err)
		}
		ch := d.byName[name]
		if ch == nil {
			continue
		}
		seen[name] = true
		p, err := EffectivePolicy(ch.Kind, registered, override)
		if err != nil {
			d.log.Warn("ignoring invalid stored policy; keeping the previous one", "channel", name, "error", err)
		} else if *ch.policy.Load() != p {
			ch.policy.Store(&p)
			d.log.Info("channel policy changed", "channel", name)
		}
		if ch.paused.Swap(paused) != paused {
			d.log.Info("channel pause changed", "channel", name, "paused", paused)
			if !paused {
				d.poke(d.wake)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read channels: %w", err)
	}
	for _, n := range d.names {
		if !seen[n] {
			return fmt.Errorf("channel %q is not registered in the database: run effectd migrate --config", n)
		}
	}
	return nil
}

func (d *Dispatcher) refreshLoop(ctx context.Context) {
	every(ctx, d.cfg.RefreshInterval, nil, func() {
		if err := d.refresh(ctx); err != nil {
			d.logDB(ctx, "refreshing channel policies", err)
		}
	})
}

// every runs fn each interval, and when wake fires, until ctx ends.
func every(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}

// listen holds a connection that LISTENs for effectd_wakeup, reconnecting when
// it breaks. Notifications only arrive while some dispatcher has said it waits.
func (d *Dispatcher) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := d.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("wake-up listener lost; polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (d *Dispatcher) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN effectd_wakeup`); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		d.poke(d.wake)
	}
}

// poke signals c without blocking.
func (d *Dispatcher) poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// setWaiting tells producers whether to NOTIFY on commit.
func (d *Dispatcher) setWaiting(ctx context.Context, waiting bool) error {
	_, err := d.pool.Exec(ctx, `UPDATE effectd.wakeup SET waiting = $1 WHERE id = 1 AND waiting <> $1`, waiting)
	return err
}

// sleep waits for d, a NOTIFY, a freed slot or the end of ctx.
func (d *Dispatcher) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-d.wake:
	case <-d.slot:
	}
}
