package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// readyWithin is how soon after the promotion every instance must be serving
// the new primary: /readyz 200 and a provider call made.
const readyWithin = 10 * time.Second

// detection is how long the primary is dead before the standby is promoted:
// what a failover manager takes to notice (its own timeouts make it longer in
// production). effectd has no writable primary meanwhile.
const detection = time.Second

// failover is a run's replication pair and what its failover did.
type failover struct {
	sync    bool
	primary *localpg.Server // killed by the failover
	standby *localpg.Server // promoted by the failover
	link    *link           // the standby's replication connection to the primary
	note    func(format string, args ...any)

	mu        sync.Mutex
	killed    time.Time // when the primary was dead
	promoting time.Time // when the promotion was asked for: the standby may accept writes from then on
	promoted  time.Time // when pg_ctl promote saw the standby accept writes (it polls: up to 100ms late)
	before    side      // the standby's content once it had applied all it received, before the promotion
	probes    []probe   // /readyz answers around the failover
	err       error     // what went wrong carrying out the failover
}

func (f *failover) mode() string {
	m := "asynchronous"
	if f.sync {
		m = "synchronous (remote_apply)"
	}
	return fmt.Sprintf("%s, link lag %s", m, f.link.lag)
}

func (f *failover) close() {
	f.link.partition()
	f.standby.Stop()
	f.primary.Stop() // already dead unless the run ended before the failover
}

// setupPair starts the primary and a streaming standby of it, and points
// everything (the instances, the producers, the checker) at both with
// target_session_attrs=read-write, so that they follow the promotion.
func (h *harness) setupPair(ctx context.Context) error {
	// Fast turns synchronous_commit off; a failover run commits as production
	// does: flushed locally (on), or applied by the standby too (remote_apply).
	prim := localpg.Options{Fast: true, Settings: []string{"synchronous_commit=on"}}
	if h.cfg.Sync {
		prim = localpg.Options{Fast: true, SyncStandby: "standby"}
	}
	var err error
	if h.pg, err = localpg.Start(ctx, filepath.Join(h.dir, "pg"), prim); err != nil {
		return err
	}
	ln, err := startLink(fmt.Sprintf("127.0.0.1:%d", h.pg.Port), h.cfg.ReplicationLag)
	if err != nil {
		return err
	}
	standby, err := h.pg.StartStandby(ctx, filepath.Join(h.dir, "standby"), "standby",
		localpg.Options{Fast: true, Settings: []string{"synchronous_commit=on",
			fmt.Sprintf("primary_conninfo='host=127.0.0.1 port=%d user=postgres'", ln.port())}})
	if err != nil {
		ln.partition()
		return err
	}
	h.fo = &failover{sync: h.cfg.Sync, primary: h.pg, standby: standby, link: ln, note: h.note}
	h.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/effectd?sslmode=disable&target_session_attrs=read-write",
		h.pg.Port, standby.Port)
	return nil
}

// failover kills the primary, reads what the standby holds once it has
// applied all it received, promotes it, and probes every instance's /readyz
// until each has answered 200 since the promotion (or for twice readyWithin).
func (h *harness) failover() {
	f := h.fo
	stop := make(chan struct{})
	var probing sync.WaitGroup
	probing.Add(1)
	go func() { defer probing.Done(); f.probeReadiness(h.instances, stop) }()
	defer func() { close(stop); probing.Wait() }()

	h.note("failover: cutting the standby off and killing the primary (pg_ctl stop -m immediate)")
	f.link.partition()
	if err := f.primary.StopImmediate(); err != nil {
		f.fail(err)
		return
	}
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := readSide(ctx, f.standby.URL("effectd"), true)
	if err != nil {
		f.fail(fmt.Errorf("reading the standby before promoting it: %w", err))
		return
	}
	time.Sleep(time.Until(killed.Add(detection))) // the fault's own schedule: no primary for this long
	promoting := time.Now()
	if err := f.standby.Promote(ctx); err != nil {
		f.fail(err)
		return
	}
	promoted := time.Now()
	f.mu.Lock()
	f.killed, f.promoting, f.promoted, f.before = killed, promoting, promoted, before
	f.mu.Unlock()
	h.pg = f.standby
	h.note("failover: standby promoted %s after the kill", promoted.Sub(killed).Round(time.Millisecond))

	deadline := time.Now().Add(2 * readyWithin)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(firstReady(f.probes, promoted))
		f.mu.Unlock()
		if n == len(h.instances) {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling the probes, with a deadline
	}
}

func (f *failover) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	f.note("failover: %v", err)
}

// probe is one /readyz answer of one instance.
type probe struct {
	instance   int
	start, end time.Time
	status     int // 0: no answer (the instance down, or a timeout)
}

// probeReadiness asks every instance's /readyz every 100ms until stop,
// appending the answers to f.probes, and waits for the questions in flight.
func (f *failover) probeReadiness(instances []*instance, stop <-chan struct{}) {
	client := &http.Client{Timeout: 2 * time.Second}
	var wg sync.WaitGroup
	for _, p := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				addr, _ := p.addr.Load().(string)
				if addr == "" {
					continue
				}
				// each probe on its own: a slow answer does not delay the next question
				wg.Add(1)
				go func() {
					defer wg.Done()
					pr := probe{instance: p.n, start: time.Now()}
					if resp, err := client.Get(addr + "/readyz"); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						pr.status = resp.StatusCode
					}
					pr.end = time.Now()
					f.mu.Lock()
					f.probes = append(f.probes, pr)
					f.mu.Unlock()
				}()
			}
		}()
	}
	wg.Wait()
}

// firstReady returns, per instance, the end of its first 200 asked after t.
func firstReady(probes []probe, t time.Time) map[int]time.Time {
	out := map[int]time.Time{}
	for _, p := range probes {
		if p.status == http.StatusOK && !p.start.Before(t) {
			if at, ok := out[p.instance]; !ok || p.end.Before(at) {
				out[p.instance] = p.end
			}
		}
	}
	return out
}

// side is the content of one side of the failover: each intent's status and
// claim count, and the producers' rows.
type side struct {
	intents   map[target]intentState
	producers map[string]bool // delivery ids
}

type intentState struct {
	status   string
	attempts int
}

// readSide reads a side; on a standby (replica) it first waits until the
// standby has applied all the WAL it received, so that what it shows is what
// its promotion starts from.
func readSide(ctx context.Context, dsn string, replica bool) (side, error) {
	s := side{intents: map[target]intentState{}, producers: map[string]bool{}}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return s, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for replica {
		var caughtUp bool
		if err := conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), true)`).Scan(&caughtUp); err != nil {
			return s, err
		}
		if caughtUp {
			break
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(10 * time.Millisecond): // polling replay, bounded by ctx
		}
	}
	intents, err := harnessdb.IntentStatuses(ctx, conn)
	if err != nil {
		return s, err
	}
	for _, in := range intents {
		s.intents[target{in.Channel, in.EventID}] = intentState{string(in.Status), in.Attempts}
	}
	ids, err := producerColumn(ctx, conn, deliveryIDsSQL)
	for _, id := range ids {
		s.producers[id] = true
	}
	return s, err
}

// failoverLoss is what the failover did, as the checker judges it: the writes
// the old primary had committed and the promoted standby never received.
type failoverLoss struct {
	sync             bool
	killed, promoted time.Time
	lostEnqueues     map[target]bool // intents the old primary held and the standby did not
	lostUpdates      map[target]bool // intents whose claim or completion the standby did not receive
	lostProducerRows int             // producers' rows likewise
}

// loss compares the old primary's final content with the standby's before
// its promotion. Commits the old primary made but never acknowledged (it died
// first) count too: under synchronous replication they are the only ones.
func (f *failover) loss(old side) *failoverLoss {
	l := &failoverLoss{sync: f.sync, killed: f.killed, promoted: f.promoted,
		lostEnqueues: map[target]bool{}, lostUpdates: map[target]bool{}}
	for t, o := range old.intents {
		b, ok := f.before.intents[t]
		switch {
		case !ok:
			l.lostEnqueues[t] = true
		case b != o:
			l.lostUpdates[t] = true
		}
	}
	for id := range old.producers {
		if !f.before.producers[id] {
			l.lostProducerRows++
		}
	}
	return l
}

// readOld starts the killed primary again, on a port of its own that nothing
// else knows, and reads its final content.
func (f *failover) readOld(ctx context.Context) (side, error) {
	old, err := localpg.Start(ctx, f.primary.Dir, localpg.Options{Fast: true})
	if err != nil {
		return side{}, fmt.Errorf("restarting the old primary to read it: %w", err)
	}
	f.primary = old
	defer old.Stop()
	return readSide(ctx, old.URL("effectd"), false)
}

// FailoverReport is what the failover cost in time, and what /readyz said.
type FailoverReport struct {
	Mode         string
	Outage       time.Duration // from the kill to the promotion
	Ready        time.Duration // from the promotion to the last instance's first /readyz 200
	FirstCall    time.Duration // from the promotion to the first provider call
	NotReady     int           // /readyz 503 answers to requests made while no primary was writable
	ReadyOutage  int           // /readyz 200 answers asked and answered while no primary was writable
	Unanswered   int           // /readyz asked while no primary was writable and not answered within 2s
	LostProducer int           // producers' rows lost (their enqueues with them)
	// CommitP50 and CommitP99 are the producers' transactions (insert,
	// enqueue, COMMIT; 8 at a time) that committed before the kill, with
	// the standby attached: what the replication mode costs an enqueue.
	CommitP50, CommitP99 time.Duration
	Commits              int
}

// checkFailover reads the old primary, feeds the loss to the checker, and
// judges how effectd followed the promotion.
func (h *harness) checkFailover(ctx context.Context, log *Log, ledger sandbox.Snapshot) (*Report, error) {
	events := log.Events()
	f := h.fo
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil || f.promoted.IsZero() {
		return nil, fmt.Errorf("chaos: the failover did not happen: %v", f.err)
	}
	old, err := f.readOld(ctx)
	if err != nil {
		return nil, err
	}
	loss := f.loss(old)
	rep, err := check(ctx, h.pool, h.cfg.storage(), events, ledger, h.cfg.Channels, loss, decide(h.hist.Ops()))
	if err != nil {
		return nil, err
	}
	fr := &FailoverReport{Mode: f.mode(), Outage: f.promoted.Sub(f.killed), LostProducer: loss.lostProducerRows}
	fr.CommitP50, fr.CommitP99, fr.Commits = log.latency(f.killed)
	for _, p := range f.probes {
		switch {
		case p.start.After(f.killed) && p.end.Before(f.promoting) && p.status == http.StatusOK:
			fr.ReadyOutage++
		case p.start.After(f.killed) && p.start.Before(f.promoting) && p.status == http.StatusServiceUnavailable:
			fr.NotReady++
		case p.start.After(f.killed) && p.start.Before(f.promoting) && p.status == 0:
			fr.Unanswered++
		}
	}
	ready := firstReady(f.probes, f.promoted)
	for _, at := range ready {
		fr.Ready = max(fr.Ready, at.Sub(f.promoted))
	}
	first := time.Time{}
	for _, c := range ledger.Calls {
		if c.At.After(f.promoted) && (first.IsZero() || c.At.Before(first)) {
			first = c.At
		}
	}
	if !first.IsZero() {
		fr.FirstCall = first.Sub(f.promoted)
	}
	rep.Failover = fr
	for _, rule := range fr.readinessRules(len(ready), len(h.instances), !first.IsZero()) {
		rep.Violations = append(rep.Violations, Violation{Rule: rule, Channel: "*", Keys: []string{"-"}})
	}
	return rep, nil
}

// readinessRules are the rules of how effectd followed the promotion that fr
// breaks: every instance's /readyz 200 and a provider call within readyWithin
// of it (ready of instances answered 200 at all, called whether a call was
// made), no /readyz 200 while no primary was writable, and a 503 then.
func (fr *FailoverReport) readinessRules(ready, instances int, called bool) []string {
	var rules []string
	if ready < instances || fr.Ready > readyWithin {
		rules = append(rules, fmt.Sprintf("%d of %d instances answered /readyz 200 after the promotion, the last %s after it: want every one within %s",
			ready, instances, fr.Ready.Round(time.Millisecond), readyWithin))
	}
	if !called || fr.FirstCall > readyWithin {
		rules = append(rules, fmt.Sprintf("no provider call within %s of the promotion", readyWithin))
	}
	if fr.ReadyOutage > 0 {
		rules = append(rules, fmt.Sprintf("/readyz answered 200 %d times while no primary was writable", fr.ReadyOutage))
	}
	if fr.NotReady == 0 {
		rules = append(rules, fmt.Sprintf("/readyz never answered 503 while no primary was writable (%d asked then got no answer within 2s)", fr.Unanswered))
	}
	return rules
}

// printFailover writes the failover's table: per channel and policy what it
// lost and what it cost, then its times.
func (r *Report) printFailover(w io.Writer) {
	fr := r.Failover
	fmt.Fprintf(w, "\nfailover, %s replication: no writable primary for %s; every instance ready %s after the promotion, first provider call %s after it; /readyz meanwhile: 503 ×%d, no answer within 2s ×%d\n",
		fr.Mode, fr.Outage.Round(time.Millisecond), fr.Ready.Round(time.Millisecond), fr.FirstCall.Round(time.Millisecond), fr.NotReady, fr.Unanswered)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "channel\tprovider\tpolicy\tenqueues lost\tgone\tapplied before\tclaims/completions lost\tre-sent\tkeys>1\tdup effects\tby the failover\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", x.Channel.Name, x.Channel.Provider, x.Channel.policy(),
			x.EnqueuesLost, x.Gone, x.AppliedLost, x.UpdatesLost, x.Resent, x.KeysTwice, x.Duplicates, x.FailoverExplained)
	}
	tw.Flush()
	fmt.Fprintf(w, "producers' rows lost with their enqueues: %d; their %d transactions before the kill (insert, enqueue, COMMIT) took p50 %s, p99 %s\n",
		fr.LostProducer, fr.Commits, fr.CommitP50.Round(10*time.Microsecond), fr.CommitP99.Round(10*time.Microsecond))
}
