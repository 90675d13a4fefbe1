package dispatcher

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/statemachine"
)

// claimed is an intent a worker holds under a lease. Its Problem says why the
// row cannot be sent as stored (a time or a key the call cannot carry): it is
// quarantined, not called.
type claimed struct {
	intentdb.Claimed
	deadline time.Time // local clock: the call must end by then, well inside the lease
}

// Idle waits: after an empty claim the claimer polls again after 1, 2, 4 and
// 8 ms, then tells producers to NOTIFY and waits for that, or its idle wait
// at most. After a claim that was not full it pauses claimPause, so that a
// trickle of intents is claimed in small batches rather than one by one. The
// flag that tells producers to NOTIFY holds for waitingHolds idle waits
// (at least minWaitingHold) and is set again while the claimer still waits.
const (
	spinSteps      = 4
	spinMax        = 8 * time.Millisecond
	claimPause     = time.Millisecond
	waitingHolds   = 10
	minWaitingHold = time.Second
)

// claimer claims due intents for every channel with room and hands them to
// the workers; when nothing is due it asks producers to NOTIFY and sleeps.
type claimer struct {
	loop
	d        *Dispatcher
	batch    int           // most rows one claim takes
	idleWait time.Duration // longest sleep when nothing is due and no NOTIFY arrives
	conn     heldConn      // claims and the wake-up flag run on it
	// waitingSet is when this claimer last set the wake-up flag
	waitingSet time.Time
}

// Start claims until Stop.
func (cl *claimer) Start(ctx context.Context) { cl.start(ctx, cl.run) }

// Stop ends claiming and waits for the round in progress, so that no call
// starts once it returns.
func (cl *claimer) Stop() { cl.stop() }

func (cl *claimer) run(ctx context.Context) {
	cl.conn = newHeldConn(cl.d.held)
	defer cl.conn.release()
	idle := 0
	waiting := false // this instance asked producers to NOTIFY
	for ctx.Err() == nil {
		claimed, full, blocked, rateWait := cl.claimRound(ctx)
		if claimed > 0 {
			idle = 0
			if waiting {
				if err := cl.setWaiting(ctx, false); err == nil {
					waiting = false
				}
			}
			if full {
				continue
			}
		}
		switch {
		case claimed > 0:
			cl.sleep(ctx, claimPause)
		case blocked:
			cl.sleep(ctx, cmpPositive(rateWait, cl.idleWait))
		case idle < spinSteps:
			idle++
			cl.sleep(ctx, min(time.Millisecond<<idle, spinMax))
		case !waiting:
			// Ask producers to NOTIFY, then claim once more: an intent committed
			// before the flag was visible is found by that claim.
			if err := cl.setWaiting(ctx, true); err != nil {
				cl.d.logDB(ctx, "setting the wake-up flag", err)
				cl.sleep(ctx, cl.idleWait)
			} else {
				waiting = true
			}
		default:
			// still idle: keep the flag from expiring (SetWaiting writes
			// only once half of its hold has passed)
			if time.Since(cl.waitingSet) > cl.waitingHold()/2 {
				if err := cl.setWaiting(ctx, true); err != nil {
					cl.d.logDB(ctx, "setting the wake-up flag", err)
				}
			}
			cl.sleep(ctx, cl.idleWait)
		}
	}
}

// waitingHold is how long the wake-up flag holds once set.
func (cl *claimer) waitingHold() time.Duration {
	return max(waitingHolds*cl.idleWait, minWaitingHold)
}

// setWaiting tells producers whether to NOTIFY on commit.
func (cl *claimer) setWaiting(ctx context.Context, waiting bool) error {
	err := cl.conn.use(ctx, func(db query.TxDB) error { return intentdb.SetWaiting(ctx, db, waiting, cl.waitingHold()) })
	if err == nil && waiting {
		cl.waitingSet = time.Now()
	}
	return err
}

// sleep waits for dur, a wake-up, a freed slot or the end of ctx.
func (cl *claimer) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-cl.d.wake:
	case <-cl.d.slot:
	}
}

func cmpPositive(a, b time.Duration) time.Duration {
	if a > 0 {
		return min(a, b)
	}
	return b
}

// claimRound claims for every channel with room. full reports that some
// channel's claim came back full (more may be due); blocked that some channel
// had no room, by concurrency or by rate.
func (cl *claimer) claimRound(ctx context.Context) (total int, full, blocked bool, rateWait time.Duration) {
	now := time.Now()
	for _, ch := range cl.d.chans {
		if ch.paused.Load() {
			continue
		}
		n, wait := ch.room(cl.batch, now)
		if n <= 0 {
			blocked = true
			if wait > 0 && (rateWait == 0 || wait < rateWait) {
				rateWait = wait
			}
			continue
		}
		rows, wait, err := cl.claim(ctx, ch, n)
		if err != nil {
			cl.d.logDB(ctx, "claiming intents", err, "channel", ch.Name)
			continue
		}
		total += len(rows)
		if len(rows) == n {
			full = true
		}
		if wait > 0 {
			blocked = true
			if rateWait == 0 || wait < rateWait {
				rateWait = wait
			}
		}
		for i := range rows {
			cl.d.workers.startCall(ch, &rows[i])
		}
	}
	return total, full, blocked, rateWait
}

// claim takes up to n due intents of ch. For a rate-limited channel it also
// reports how long until its shared rate tokens hold a token again, when they
// ran dry.
func (cl *claimer) claim(ctx context.Context, ch *channel, n int) ([]claimed, time.Duration, error) {
	p := ch.policy.Load()
	// The lease starts at the database's now(), no earlier than this moment on
	// our clock: a deadline counted from here ends inside it, the channel's
	// grace after the call before the lease ends, so that the reconciler looks
	// up only once the provider can no longer be acting on the call.
	deadline := time.Now().Add(p.Lease.D() - p.GraceAfterCall())
	params := intentdb.ClaimParams{Channel: ch.Name, Lease: p.Lease.D(), Limit: n,
		RatePerSecond: p.RatePerSecond, Burst: burst(p.RatePerSecond)}
	rows, avail, err := cl.d.store.Claim(ctx, cl.conn.use, params)
	if err != nil {
		return nil, 0, err
	}
	// Every row claimed here is SENDING now: a row that cannot be sent as
	// stored is quarantined by its worker instead.
	out := make([]claimed, len(rows))
	for i, r := range rows {
		r.Problem = cmp.Or(r.Problem, headerProblem("idempotency_key", r.Key))
		out[i] = claimed{Claimed: r, deadline: deadline}
	}
	var wait time.Duration
	if left := avail - float64(len(out)); p.RatePerSecond > 0 && len(out) < n && left < 1 {
		wait = time.Duration((1 - left) / p.RatePerSecond * float64(time.Second))
	}
	return out, wait, nil
}

// minCallTime is the least time left on a lease for a call to start.
const minCallTime = 100 * time.Millisecond

// job is one claimed intent handed to a worker.
type job struct {
	ch *channel
	c  claimed
}

// workerIdle is how long an idle worker waits for another call before it exits.
const workerIdle = 10 * time.Second

// workers run claimed intents' provider calls, one goroutine per call in
// flight, and hand each outcome to the completers. A worker outlives its call
// so that its grown stack and buffers are reused by the next.
type workers struct {
	d          *Dispatcher
	out        chan<- completion // the completers' queue
	jobs       chan job          // hands a claimed intent to an idle worker
	quit       chan struct{}     // closed by Stop: idle workers exit
	calls      sync.WaitGroup    // calls started and not yet handed to the completers
	ctx        context.Context   // provider calls run under it; abandon cancels it
	abandon    context.CancelFunc
	beforeCall func(id int64, attempt int32) // tests: stall a worker between claim and call
}

func newWorkers(d *Dispatcher, out chan<- completion) *workers {
	return &workers{d: d, out: out, jobs: make(chan job), quit: make(chan struct{})}
}

// Start readies the workers: calls start as the claimer hands them intents.
func (w *workers) Start(ctx context.Context) {
	w.ctx, w.abandon = context.WithCancel(ctx)
}

// Stop waits for the calls in flight until ctx ends, then cancels the rest
// (their outcome is recorded as maybe sent) and returns ctx's error. Every
// outcome is in the completers' queue when it returns. The claimer must have
// stopped first.
func (w *workers) Stop(ctx context.Context) error {
	var err error
	finished := make(chan struct{})
	go func() { w.calls.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		w.d.log.Warn("shutdown deadline reached: abandoning in-flight calls", "error", ctx.Err())
		w.abandon()
		<-finished
		err = ctx.Err()
	}
	w.abandon()
	close(w.quit)
	return err
}

// startCall hands c to an idle worker, or starts one.
func (w *workers) startCall(ch *channel, c *claimed) {
	ch.inflight.Add(1)
	w.d.m.inflight.WithLabelValues(ch.Name).Inc()
	w.calls.Add(1)
	j := job{ch: ch, c: *c}
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
}

func (w *workers) work(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		out := w.call(j.ch, &j.c)
		// The slot frees once the outcome is queued for writing, not when the
		// call returns: while the completers lag (a slow or locked database),
		// the claimer waits instead of claiming rows whose outcomes would pile
		// up in memory, each a SENDING row the reconciler must settle if the
		// process dies.
		w.out <- out
		j.ch.inflight.Add(-1)
		w.d.m.inflight.WithLabelValues(j.ch.Name).Dec()
		poke(w.d.slot)
		w.calls.Done()
		idle.Reset(workerIdle)
		select {
		case j = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// call runs one attempt outside any transaction and decides its outcome.
func (w *workers) call(ch *channel, c *claimed) completion {
	p := ch.policy.Load()
	out := completion{id: c.ID, bucket: c.Bucket, key: c.Key, created: c.CreatedAt, attempts: c.Attempts, channel: ch.Name, started: time.Now(), called: true,
		traceparent: c.Traceparent}
	if c.Problem != "" {
		out.called = false
		out.finished = out.started
		out.event, out.outcome = statemachine.Fail, "quarantined"
		out.err = "quarantined, not sent: " + c.Problem + "; effectd.enqueue refuses such a value now"
		return out
	}
	if p.MaxAge > 0 && out.started.Sub(c.OccurredAt) > p.MaxAge.D() {
		out.called = false
		out.finished = out.started
		out.event, out.outcome = statemachine.Expire, "skipped"
		out.err = "max_age " + p.MaxAge.String() + " passed before sending"
		return out
	}
	if w.beforeCall != nil {
		w.beforeCall(c.ID, c.Attempts)
	}
	// The call must end before the lease does, or the reconciler could settle
	// (and resend) a call still in flight. A worker that reaches the call too
	// late — paused, or starved — does not call at all: the row goes back to
	// PENDING through the fence, unless the reconciler has settled it already.
	if time.Until(c.deadline) < minCallTime {
		out.called = false
		out.finished = out.started
		out.event, out.outcome, out.next = statemachine.Retry, "retry", out.started
		out.err = "the lease was nearly over before the call started; not called"
		return out
	}
	ctx, cancel := context.WithDeadline(w.ctx, c.deadline)
	defer cancel()
	ctx, span := w.d.startAttempt(ctx, ch, c, out.started)
	if span != nil {
		defer func() { endSpan(span, out.outcome, out.err != "") }()
	}
	meta := map[string]string{effect.MetaEventID: c.EventID, effect.MetaIntentID: strconv.FormatInt(c.ID, 10)}
	ref, err := w.d.send(ctx, ch, c, meta)
	out.finished = time.Now()
	observe(ctx, w.d.m.calls.WithLabelValues(ch.Name), out.finished.Sub(out.started).Seconds())
	if err == nil {
		out.event, out.outcome, out.ref = statemachine.Succeed, "sent", validText(ref)
		return out
	}
	out.err = dbText(err.Error(), maxErrorText)
	out.logErr = RedactText(out.err, c.Payload, ch.Redact)
	class := effect.Classify(err)
	if class.RetryAfter > 0 {
		w.slowDown(ch, class.RetryAfter)
	}
	last := int(c.Attempts) >= p.MaxAttempts
	next := out.finished
	if class.Retryable {
		next = out.finished.Add(p.Backoff.Delay(int(c.Attempts), class.RetryAfter))
	}
	switch {
	case class.MaybeSent && (!ch.keyed || PastKeyWindow(ch.Kind, c.CreatedAt, next)):
		// No key to repeat the call safely (none, or the provider will have
		// forgotten it by the next attempt): settle it by lookup or policy now.
		out.stayInDoubt, out.outcome = true, "maybe_sent"
		poke(w.d.settle)
	case class.MaybeSent && last:
		out.event, out.outcome = statemachine.Doubt, "in_doubt"
	case class.Retryable && !last:
		out.event, out.outcome = statemachine.Retry, "retry"
		out.next = next
	default:
		out.event, out.outcome = statemachine.Fail, "failed"
	}
	return out
}

// maxErrorText bounds the provider error text stored on a row and its attempt.
const maxErrorText = 1000

// dbText is s as validText makes it, cut on a rune boundary to at most n bytes.
func dbText(s string, n int) string {
	s = validText(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validText makes s text PostgreSQL stores: invalid UTF-8 and NUL bytes (which
// a text value cannot hold) become U+FFFD. A provider's answer may hold any
// byte, and one value the server refuses fails the whole statement, a
// completion batch of other intents' outcomes included.
func validText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// maxRetryAfter caps how long a provider's Retry-After keeps a channel from
// claiming.
const maxRetryAfter = 5 * time.Minute

// slowDown honours a provider's Retry-After for the whole channel: this
// instance stops claiming for it, and a rate-limited channel's shared rate
// tokens are emptied so that every instance does.
func (w *workers) slowDown(ch *channel, after time.Duration) {
	after = min(after, maxRetryAfter)
	w.d.m.retryAfter.WithLabelValues(ch.Name).Add(after.Seconds())
	until := time.Now().Add(after).UnixNano()
	for {
		old := ch.coolUntil.Load()
		if old >= until || ch.coolUntil.CompareAndSwap(old, until) {
			break
		}
	}
	if r := ch.policy.Load().RatePerSecond; r > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), w.d.cfg.WriteTimeout)
		defer cancel()
		if err := channeldb.SlowDown(ctx, w.d.pool, ch.Name, after, r); err != nil {
			w.d.log.Warn("slowing the channel down for every instance", "channel", ch.Name, "error", err)
		}
	}
}
