package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/sandbox"
)

// Fault names, as given to --faults.
const (
	FaultKill      = "kill"      // SIGKILL an instance, restart it a little later
	FaultStop      = "stop"      // SIGSTOP an instance past its lease, then SIGCONT
	FaultPGRestart = "pgrestart" // restart PostgreSQL (on Citus, a worker)
	FaultLatency   = "latency"   // provider latency spike (sometimes past the call deadline)
	Fault5xx       = "5xx"       // provider 5xx burst
	Fault429       = "429"       // provider 429 storm with Retry-After
	FaultHang      = "hang"      // provider never answers
	FaultDrop      = "drop"      // provider applies, then drops the answer
	// FaultFailover kills the primary (-m immediate) once mid-burst and
	// promotes its streaming standby. It is not part of "all": it needs a
	// standby, and a run has one failover.
	FaultFailover = "failover"
)

// AllFaults lists every fault, in the order of the table.
var AllFaults = []string{FaultKill, FaultStop, FaultPGRestart, FaultLatency, Fault5xx, Fault429, FaultHang, FaultDrop}

// ParseFaults reads a comma-separated list of fault names, or "all", or "none".
func ParseFaults(s string) ([]string, error) {
	switch s {
	case "all":
		return slices.Clone(AllFaults), nil
	case "", "none":
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(AllFaults, f) && f != FaultFailover {
			return nil, fmt.Errorf("unknown fault %q (want %s, %s, all or none)", f, strings.Join(AllFaults, ", "), FaultFailover)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if slices.Contains(out, FaultFailover) && slices.Contains(out, FaultPGRestart) {
		return nil, fmt.Errorf("%s and %s do not mix: a restart would bring the killed primary back", FaultFailover, FaultPGRestart)
	}
	return out, nil
}

// injector applies faults on a seeded schedule. Every parameter of the
// schedule is drawn from rng in one goroutine, so a seed replays the same
// schedule (the processes' own timing still varies).
type injector struct {
	rng       *rand.Rand
	faults    []string
	lease     time.Duration
	instances []*instance
	restartPG func() error  // stops PostgreSQL and starts it again
	pgName    string        // what restartPG restarts, for the log ["PostgreSQL"]
	failover  func()        // kills the primary and promotes the standby; nil: no failover
	window    time.Duration // the producers' window: the failover lands inside it
	sb        *sandbox.Server
	note      func(format string, args ...any)

	pgMu    sync.Mutex
	kindMu  map[string]*sync.Mutex // one sandbox fault per provider kind at a time
	wg      sync.WaitGroup
	counts  map[string]int
	countMu sync.Mutex
}

// run injects faults until ctx ends (a fault in progress runs its course
// unless stop ends: a SIGSTOP still outlasts the lease), then waits for every fault in progress to
// restore what it broke (instances running, PostgreSQL up, sandbox clean).
func (j *injector) run(ctx, stop context.Context) {
	j.kindMu = map[string]*sync.Mutex{"webhook": {}, "stripe": {}, "twilio": {}, "*": {}}
	j.counts = map[string]int{}
	defer j.wg.Wait()
	if j.failover != nil {
		// once, mid-burst: between 30% and 60% of the producers' window
		at := time.Duration((0.3 + 0.3*j.rng.Float64()) * float64(j.window))
		j.spawn(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(at):
			}
			j.count(FaultFailover)
			j.failover()
		})
	}
	others := slices.DeleteFunc(slices.Clone(j.faults), func(f string) bool { return f == FaultFailover })
	if len(others) == 0 {
		return
	}
	j.faults = others
	for {
		gap := time.Duration(300+j.rng.IntN(1700)) * time.Millisecond // the schedule itself
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		f := j.pick()
		switch f {
		case FaultKill:
			p := j.instances[j.rng.IntN(len(j.instances))]
			down := time.Duration(200+j.rng.IntN(2800)) * time.Millisecond
			j.spawn(func() { j.kill(stop, p, down) })
		case FaultStop:
			p := j.instances[j.rng.IntN(len(j.instances))]
			stopped := j.lease + time.Duration(500+j.rng.IntN(3000))*time.Millisecond
			j.spawn(func() { j.stop(stop, p, stopped) })
		case FaultPGRestart:
			j.spawn(func() { j.pgRestart() })
		default:
			kind := []string{"webhook", "stripe", "twilio"}[j.rng.IntN(3)]
			fault := j.providerFault(f, kind)
			window := time.Duration(1000+j.rng.IntN(3000)) * time.Millisecond
			j.spawn(func() { j.provider(f, kind, fault, window) })
		}
	}
}

// pick draws the next fault; process faults weigh double, so that a short
// run still stops and kills instances mid-call several times.
func (j *injector) pick() string {
	var w []string
	for _, f := range j.faults {
		w = append(w, f)
		if f == FaultKill || f == FaultStop {
			w = append(w, f)
		}
	}
	return w[j.rng.IntN(len(w))]
}

func (j *injector) spawn(f func()) {
	j.wg.Add(1)
	go func() { defer j.wg.Done(); f() }()
}

func (j *injector) count(name string) {
	j.countMu.Lock()
	j.counts[name]++
	j.countMu.Unlock()
}

// Counts returns how many times each fault was injected.
func (j *injector) Counts() map[string]int {
	j.countMu.Lock()
	defer j.countMu.Unlock()
	return maps.Clone(j.counts)
}

// kill SIGKILLs p and restarts it after down (at once if the run is ending).
func (j *injector) kill(ctx context.Context, p *instance, down time.Duration) {
	if !p.mu.TryLock() {
		return // another fault holds this instance
	}
	defer p.mu.Unlock()
	if !p.alive() {
		return
	}
	j.count(FaultKill)
	j.note("SIGKILL instance %d mid-call, restart in %s", p.n, down.Round(time.Millisecond))
	j.midCall(func() { p.kill() })
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	if err := p.start(context.WithoutCancel(ctx)); err != nil {
		j.note("restarting instance %d: %v", p.n, err)
	}
}

// midCall runs signal while calls are in flight: every provider answers
// 400ms late from 500ms before it until it is sent, so that the signal lands
// between a provider call and the recording of its outcome. (Faults set on a
// provider kind take precedence over this one.)
func (j *injector) midCall(signal func()) {
	mu := j.kindMu["*"]
	if !mu.TryLock() {
		signal()
		return
	}
	defer mu.Unlock()
	j.sb.Faults.Set("*", sandbox.Fault{Latency: 400 * time.Millisecond})
	time.Sleep(500 * time.Millisecond) // part of the fault: let calls start
	signal()
	j.sb.Faults.Set("*", sandbox.Fault{})
}

// stop SIGSTOPs p for longer than its lease, so its calls in flight are
// settled by another instance and its late completions must be fenced out.
func (j *injector) stop(ctx context.Context, p *instance, d time.Duration) {
	if !p.mu.TryLock() {
		return
	}
	defer p.mu.Unlock()
	if !p.alive() {
		return
	}
	j.count(FaultStop)
	j.note("SIGSTOP instance %d mid-call for %s", p.n, d.Round(time.Millisecond))
	j.midCall(func() { p.signal(syscall.SIGSTOP, false) })
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	p.signal(syscall.SIGCONT, false)
}

// pgRestart restarts PostgreSQL (a fast shutdown: every connection is cut).
func (j *injector) pgRestart() {
	if !j.pgMu.TryLock() {
		return
	}
	defer j.pgMu.Unlock()
	j.count(FaultPGRestart)
	name := cmp.Or(j.pgName, "PostgreSQL")
	j.note("restarting %s", name)
	start := time.Now()
	if err := j.restartPG(); err != nil {
		j.note("%s restart failed: %v", name, err)
		return
	}
	j.note("%s back after %s", name, time.Since(start).Round(time.Millisecond))
}

// lookupGrace is every channel's lookup_grace for a lease: the sandbox, like
// a provider, applies a request its latency after it arrived even when the
// caller stopped waiting (a stopped instance never hangs up), so a lookup
// proves an absence only that long after the call's deadline. The latency
// fault stays under it; a provider slower than its channel's grace is a
// misconfiguration the checker would report as a duplicate. It leaves the
// call the least of the lease a policy allows (a --lease of 1s: 500ms each).
func lookupGrace(lease time.Duration) time.Duration {
	return min(lease*3/4, lease-policy.MinCallTime.D())
}

// providerFault draws the sandbox fault for name on kind.
func (j *injector) providerFault(name, kind string) sandbox.Fault {
	switch name {
	case FaultLatency:
		// past the call's deadline now and then, never past the grace the
		// channels give the provider after a call (lookupGrace)
		most := lookupGrace(j.lease) - 100*time.Millisecond
		return sandbox.Fault{Latency: 200*time.Millisecond + time.Duration(j.rng.Int64N(int64(most-200*time.Millisecond)))}
	case Fault5xx:
		statuses := []int{500, 502, 503}
		if kind == "stripe" {
			// Stripe saves a 500 as the key's answer and replays it until the
			// key expires: such refunds end FAILED, correctly but uselessly.
			statuses = []int{502, 503}
		}
		return sandbox.Fault{ErrorRate: 0.3 + 0.5*j.rng.Float64(), ErrorStatus: statuses[j.rng.IntN(len(statuses))]}
	case Fault429:
		return sandbox.Fault{ErrorRate: 0.5 + 0.45*j.rng.Float64(), ErrorStatus: 429, RetryAfter: 1}
	case FaultHang:
		return sandbox.Fault{HangRate: 0.1 + 0.3*j.rng.Float64()}
	default: // FaultDrop
		return sandbox.Fault{DropRate: 0.1 + 0.4*j.rng.Float64()}
	}
}

// provider sets fault on kind for window, then clears it.
func (j *injector) provider(name, kind string, fault sandbox.Fault, window time.Duration) {
	mu := j.kindMu[kind]
	if !mu.TryLock() {
		return
	}
	defer mu.Unlock()
	j.count(name)
	j.note("%s on %s for %s: %+v", name, kind, window.Round(time.Millisecond), fault)
	j.sb.Faults.Set(kind, fault)
	time.Sleep(window) // the fault's window is the schedule itself
	j.sb.Faults.Set(kind, sandbox.Fault{})
}
