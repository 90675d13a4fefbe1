package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
)

// scripted is a provider whose answers a test decides per key and call number.
type scripted struct {
	mu     sync.Mutex
	calls  map[string]int
	answer func(key string, n int) (string, error)
}

func (s *scripted) Send(ctx context.Context, key string, _ json.RawMessage, meta map[string]string) (string, error) {
	s.mu.Lock()
	s.calls[key]++
	n := s.calls[key]
	s.mu.Unlock()
	if meta[effect.MetaEventID] == "" || meta[effect.MetaIntentID] == "" {
		return "", fmt.Errorf("meta missing: %v", meta)
	}
	return s.answer(key, n)
}

func (s *scripted) Calls(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

// providerErr is a provider error with the behaviour a test picks.
type providerErr struct {
	retryable, maybeSent bool
	after                time.Duration
}

func (e providerErr) Error() string {
	return fmt.Sprintf("scripted error retryable=%v maybeSent=%v", e.retryable, e.maybeSent)
}
func (e providerErr) Retryable() bool           { return e.retryable }
func (e providerErr) MaybeSent() bool           { return e.maybeSent }
func (e providerErr) RetryAfter() time.Duration { return e.after }

// fastPolicy retries within milliseconds. Its lease is long: under load a
// worker can take a second to reach its call, and a lease that ends first adds
// an attempt that the exact sequences below do not expect. Tests about expired
// leases shorten it (shortLease) or backdate lease_expires_at.
func fastPolicy(kind string) policy.Policy {
	p := policy.Default(kind)
	p.Backoff = policy.Backoff{Base: policy.Duration(time.Millisecond), Max: policy.Duration(5 * time.Millisecond)}
	p.MaxAttempts = 3
	p.Lease = policy.Duration(30 * time.Second)
	return p
}

// shortLease is the shortest lease a policy may have.
const shortLease = policy.Duration(time.Second)

type rig struct {
	pool *pgxpool.Pool
	d    *dispatcher.Dispatcher
}

// start registers one channel "c" with provider p and policy pol, and runs a dispatcher.
func start(t *testing.T, kind string, p dispatcher.Provider, pol policy.Policy) rig {
	t.Helper()
	pool := pgtest.New(t)
	chans := []dispatcher.Channel{{Name: "c", Kind: kind, Provider: p, Policy: pol}}
	d := run(t, pool, dispatcher.Config{Channels: chans, ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	return rig{pool: pool, d: d}
}

// run registers cfg's channels on pool, builds a dispatcher, applies setup
// (before Start), starts it, and stops it when the test ends.
func run(t *testing.T, pool *pgxpool.Pool, cfg dispatcher.Config, setup ...func(*dispatcher.Dispatcher)) *dispatcher.Dispatcher {
	t.Helper()
	ctx := context.Background()
	if err := dispatcher.Register(ctx, pool, cfg.Channels); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(d)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := d.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return d
}

func (r rig) enqueue(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: id, Channel: "c", Payload: `{"to":"+15005550006","body":"hi"}`}); err != nil || !ok {
			t.Fatalf("enqueue %s: %v %v", id, ok, err)
		}
	}
}

type row struct {
	Status, Ref, LastError string
	Attempts               int
	Outcomes               []string
}

func (r rig) row(t *testing.T, event string) row {
	t.Helper()
	var x row
	var id int64
	err := r.pool.QueryRow(context.Background(), `SELECT id, status, coalesce(provider_ref,''), coalesce(last_error,''), attempts FROM effectd.intents WHERE event_id=$1`, event).
		Scan(&id, &x.Status, &x.Ref, &x.LastError, &x.Attempts)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := r.pool.Query(context.Background(), `SELECT kind || ':' || outcome FROM effectd.attempts WHERE intent_id=$1 ORDER BY id`, id)
	for rows.Next() {
		var s string
		rows.Scan(&s)
		x.Outcomes = append(x.Outcomes, s)
	}
	return x
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r rig) waitStatus(t *testing.T, event, status string) row {
	t.Helper()
	var x row
	eventually(t, 10*time.Second, event+" → "+status, func() bool { x = r.row(t, event); return x.Status == status })
	return x
}

func TestDispatchOutcomes(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch key {
		case "c:ok":
			return "ref-ok", nil
		case "c:flaky": // fails twice, then succeeds on the last allowed attempt
			if n < 3 {
				return "", providerErr{retryable: true}
			}
			return "ref-flaky", nil
		case "c:permanent":
			return "", providerErr{retryable: false}
		case "c:always-busy":
			return "", providerErr{retryable: true}
		}
		return "", fmt.Errorf("unexpected key %s", key)
	}}
	r := start(t, "twilio", p, fastPolicy("twilio"))
	r.enqueue(t, "ok", "flaky", "permanent", "always-busy")

	ok := r.waitStatus(t, "ok", "SENT")
	if ok.Ref != "ref-ok" || ok.Attempts != 1 || len(ok.Outcomes) != 1 || ok.Outcomes[0] != "send:sent" {
		t.Errorf("ok: %+v", ok)
	}
	flaky := r.waitStatus(t, "flaky", "SENT")
	if flaky.Ref != "ref-flaky" || flaky.Attempts != 3 || fmt.Sprint(flaky.Outcomes) != "[send:retry send:retry send:sent]" {
		t.Errorf("flaky: %+v", flaky)
	}
	perm := r.waitStatus(t, "permanent", "FAILED")
	if perm.Attempts != 1 || perm.LastError == "" || fmt.Sprint(perm.Outcomes) != "[send:failed]" {
		t.Errorf("permanent: %+v", perm)
	}
	busy := r.waitStatus(t, "always-busy", "FAILED")
	if busy.Attempts != 3 || p.Calls("c:always-busy") != 3 {
		t.Errorf("always-busy: %+v after %d calls; want 3 attempts", busy, p.Calls("c:always-busy"))
	}
}

// TestMaybeSentKeyed: a keyed provider's maybe-sent call is repeated with the
// same key; on the last attempt it goes to IN_DOUBT, never FAILED.
func TestMaybeSentKeyed(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if key == "c:once" && n == 1 {
			return "", providerErr{retryable: true, maybeSent: true}
		}
		if key == "c:never" {
			return "", providerErr{retryable: true, maybeSent: true}
		}
		return "ref", nil
	}}
	r := start(t, "webhook", keyedProvider{p}, fastPolicy("webhook"))
	r.enqueue(t, "once", "never")
	once := r.waitStatus(t, "once", "SENT")
	if once.Attempts != 2 || fmt.Sprint(once.Outcomes) != "[send:retry send:sent]" {
		t.Errorf("once: %+v", once)
	}
	never := r.waitStatus(t, "never", "IN_DOUBT")
	if never.Attempts != 3 {
		t.Errorf("never: %+v", never)
	}
}

// TestMaybeSentUnkeyed: without a key, a maybe-sent call is settled by the
// channel's in_doubt policy at once.
func TestMaybeSentUnkeyed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy, want string
		calls        int
	}{
		{policy.InDoubtManual, "IN_DOUBT", 1},
		{policy.InDoubtSkip, "SKIPPED", 1},
		{policy.InDoubtResend, "SENT", 2},
		{policy.InDoubtLookup, "IN_DOUBT", 1}, // no Lookup: the fallback (manual) decides
	} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
				if n == 1 {
					return "", providerErr{retryable: true, maybeSent: true}
				}
				return "ref-2", nil
			}}
			pol := fastPolicy("twilio")
			pol.InDoubt = c.policy
			r := start(t, "twilio", p, pol)
			r.enqueue(t, "e")
			got := r.waitStatus(t, "e", c.want)
			if p.Calls("c:e") != c.calls {
				t.Errorf("calls = %d, want %d", p.Calls("c:e"), c.calls)
			}
			if got.Outcomes[0] != "send:maybe_sent" || len(got.Outcomes) < 2 || got.Outcomes[1][:7] != "lookup:" {
				t.Errorf("attempts = %v", got.Outcomes)
			}
		})
	}
}

func TestMaxAgeSkips(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pol := fastPolicy("webhook")
	pol.MaxAge = policy.Duration(time.Minute)
	r := start(t, "webhook", keyedProvider{p}, pol)
	if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: "old", Channel: "c", Payload: `{}`, OccurredAt: time.Now().Add(-2 * time.Minute)}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.enqueue(t, "fresh")
	r.waitStatus(t, "fresh", "SENT")
	old := r.waitStatus(t, "old", "SKIPPED")
	if p.Calls("c:old") != 0 || len(old.Outcomes) != 0 {
		t.Errorf("old was called %d times, attempts %v", p.Calls("c:old"), old.Outcomes)
	}
}

// TestLateCompletionFenced: a call that outlives its lease is settled by the
// reconciler and sent again; the first call's late answer must not overwrite
// the row that the second call settled.
func TestLateCompletionFenced(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if n == 1 {
			<-release // ignores its context: a stalled worker
			return "", providerErr{retryable: false}
		}
		return "ref-second", nil
	}}
	pol := fastPolicy("webhook")
	pol.InDoubt = policy.InDoubtResend
	pol.Lease = shortLease
	r := start(t, "webhook", keyedProvider{p}, pol)
	r.enqueue(t, "slow")
	second := r.waitStatus(t, "slow", "SENT")
	close(release)
	var fenced row
	eventually(t, 5*time.Second, "the late attempt is recorded as fenced out", func() bool {
		fenced = r.row(t, "slow")
		for _, o := range fenced.Outcomes {
			if o == "send:failed (fenced out)" {
				return true
			}
		}
		return false
	})
	// At least two attempts: on a loaded machine the 1 s lease can expire once
	// more before the second call, which only adds an attempt.
	if fenced.Status != "SENT" || fenced.Ref != "ref-second" || second.Attempts < 2 {
		t.Fatalf("late completion overwrote the row: %+v", fenced)
	}
}

// TestPauseAndPolicyRefresh: a pause stored in the database stops claiming
// for that channel only; resume restarts it.
func TestPauseAndPolicyRefresh(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pool := pgtest.New(t)
	ctx := context.Background()
	var chans []dispatcher.Channel
	for _, name := range []string{"c", "d"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: "webhook", Provider: keyedProvider{p}, Policy: fastPolicy("webhook")})
	}
	d := run(t, pool, dispatcher.Config{Channels: chans, RefreshInterval: 50 * time.Millisecond})
	r := rig{pool: pool, d: d}
	pool.Exec(ctx, `UPDATE effectd.channels SET paused = true WHERE name = 'c'`)
	eventually(t, 5*time.Second, "the dispatcher sees the pause", func() bool { return dispatcher.Paused(d, "c") })
	r.enqueue(t, "paused")
	// An intent on the other channel, committed after the paused one, is sent:
	// the claim rounds since then passed over the paused channel.
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "other", Channel: "d", Payload: `{}`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.waitStatus(t, "other", "SENT")
	if got := r.row(t, "paused"); got.Status != "PENDING" {
		t.Fatalf("paused channel dispatched: %+v", got)
	}
	pool.Exec(ctx, `UPDATE effectd.channels SET paused = false WHERE name = 'c'`)
	r.waitStatus(t, "paused", "SENT")
}

// TestOrderingKey: an intent waits while an older one with its ordering key is
// unsettled, even when the older one is retrying.
func TestOrderingKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string // "call:<key>" and "sent:<key>" in order
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, "call:"+key)
		if key == "c:first" && n < 3 {
			return "", providerErr{retryable: true}
		}
		events = append(events, "sent:"+key)
		return "ref", nil
	}}
	r := start(t, "webhook", keyedProvider{p}, fastPolicy("webhook"))
	ctx := context.Background()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, id := range []string{"first", "second"} {
		if _, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: id, Channel: "c", Payload: `{}`, OrderingKey: "acct-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A retry due in milliseconds may wait for the claimer's idle wait when
	// its completion is written after the claimer went idle (no NOTIFY for
	// a retry): three attempts can take longer than waitStatus's 10 s on a
	// loaded machine. The order is what this test checks.
	eventually(t, 60*time.Second, "second → SENT", func() bool { return r.row(t, "second").Status == "SENT" })
	mu.Lock()
	defer mu.Unlock()
	want := "[call:c:first call:c:first call:c:first sent:c:first call:c:second sent:c:second]"
	if fmt.Sprint(events) != want {
		t.Fatalf("calls = %v\nwant    %s", events, want)
	}
}

// TestStalledWorkerDoesNotCallLate: a worker paused between its claim and its
// call (a SIGSTOP, a starved scheduler) wakes after its lease has ended and the
// reconciler has sent the intent again. It must not call the provider.
func TestStalledWorkerDoesNotCallLate(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pol := fastPolicy("twilio")
	pol.InDoubt = policy.InDoubtResend
	pol.Lease = shortLease
	pool := pgtest.New(t)
	chans := []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}}
	resent := make(chan struct{})
	d := run(t, pool, dispatcher.Config{Channels: chans, ReconcileInterval: 50 * time.Millisecond}, func(d *dispatcher.Dispatcher) {
		dispatcher.SetBeforeCall(d, func(id int64, attempt int32) {
			if attempt == 1 {
				<-resent // stalled until the intent was sent by someone else
			}
		})
	})
	r := rig{pool: pool, d: d}
	r.enqueue(t, "e")
	got := r.waitStatus(t, "e", "SENT")
	close(resent)
	if got.Attempts != 2 {
		t.Fatalf("attempts = %d, want 2 (the stalled claim, then the resend)", got.Attempts)
	}
	// The stalled worker's outcome reaches the completer (and is fenced out)
	// without a call: wait for the fenced-out counter through a final row read.
	eventually(t, 5*time.Second, "the stalled worker finished", func() bool {
		return dispatcher.Fenced(d, "c") == 1
	})
	if n := p.Calls("c:e"); n != 1 {
		t.Fatalf("provider called %d times; the stalled worker called after its lease ended", n)
	}
}

// TestIdleDispatcherWokenByNotify: an idle dispatcher asks producers to NOTIFY
// and waits; a commit wakes it at once. The fallback poll is set to a minute,
// so only the notification can explain a prompt send.
func TestIdleDispatcherWokenByNotify(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pool := pgtest.New(t)
	ctx := context.Background()
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: keyedProvider{p}, Policy: fastPolicy("webhook")}}
	r := rig{pool: pool, d: run(t, pool, dispatcher.Config{Channels: chans, PollInterval: time.Minute})}
	waiting := func() bool {
		var w bool
		pool.QueryRow(ctx, `SELECT waiting FROM effectd.wakeup`).Scan(&w)
		return w
	}
	eventually(t, 5*time.Second, "the idle dispatcher asks for NOTIFY", waiting)
	// A LISTEN that is not yet in place would miss the notification: the
	// listener connects in the background, so wait until the server lists it.
	eventually(t, 5*time.Second, "the dispatcher listens", func() bool {
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN effectd_wakeup' AND datname = current_database()`).Scan(&n)
		return n == 1
	})
	start := time.Now()
	r.enqueue(t, "wake")
	eventually(t, 10*time.Second, "sent after the commit", func() bool { return r.row(t, "wake").Status == "SENT" })
	t.Logf("sent %s after the commit", time.Since(start).Round(time.Millisecond))
}

// TestWakeupFlagHoldsWhileIdleOnly: the flag that makes producers NOTIFY
// holds for a bounded time, an idle dispatcher sets it again before it
// expires, and once the dispatcher stops it expires by itself: a dispatcher
// that stopped or died while idle used to leave it set, and every producer's
// commit NOTIFYed, one at a time (migration 015).
func TestWakeupFlagHoldsWhileIdleOnly(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pool := pgtest.New(t)
	ctx := context.Background()
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: keyedProvider{p}, Policy: fastPolicy("webhook")}}
	d, err := func() (*dispatcher.Dispatcher, error) {
		if err := dispatcher.Register(ctx, pool, chans); err != nil {
			return nil, err
		}
		return dispatcher.New(pool, dispatcher.Config{Channels: chans, PollInterval: 20 * time.Millisecond})
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// until as an epoch, and whether producers NOTIFY now
	flag := func() (until float64, notify bool) {
		pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM until), 0), waiting AND coalesce(until > now(), false) FROM effectd.wakeup`).
			Scan(&until, &notify)
		return until, notify
	}
	var first float64
	eventually(t, 5*time.Second, "the idle dispatcher asks for NOTIFY", func() bool {
		u, on := flag()
		first = u
		return on
	})
	var lead float64
	if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM until - now()) FROM effectd.wakeup`).Scan(&lead); err != nil {
		t.Fatal(err)
	}
	if lead > 1.5 {
		t.Fatalf("the flag holds for %.1f s more, want at most the hold (1 s at a 20 ms poll)", lead)
	}
	eventually(t, 5*time.Second, "the idle dispatcher sets the flag again before it expires", func() bool {
		u, on := flag()
		return on && u > first
	})
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the flag of a stopped dispatcher expires", func() bool {
		_, on := flag()
		return !on
	})
}

// TestStopDrainsAndRecords: Stop lets in-flight calls finish until its context
// ends, cancels the rest, and records every outcome: no row is left SENDING.
func TestStopDrainsAndRecords(t *testing.T) {
	t.Parallel()
	started := make(chan string, 2)
	p := providerFunc(func(ctx context.Context, key string) (string, error) {
		started <- key
		if key == "c:quick" {
			return "ref-quick", nil
		}
		<-ctx.Done() // a call that would outlive the drain
		return "", ctx.Err()
	})
	pool := pgtest.New(t)
	ctx := context.Background()
	pol := fastPolicy("webhook")
	pol.Lease = policy.Duration(time.Minute)
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: keyedProvider{p}, Policy: pol}}
	d := run(t, pool, dispatcher.Config{Channels: chans}) // its cleanup's second Stop is a no-op
	r := rig{pool: pool, d: d}
	r.enqueue(t, "slow", "quick")
	<-started
	<-started
	r.waitStatus(t, "quick", "SENT")
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := d.Stop(sctx); err == nil {
		t.Fatal("Stop returned nil although a call outlived the drain")
	}
	got := r.row(t, "slow")
	if got.Status != "PENDING" || len(got.Outcomes) != 1 || got.Outcomes[0] != "send:retry" {
		t.Fatalf("abandoned call: %+v; want PENDING with its attempt recorded (maybe sent, to repeat with its key)", got)
	}
}

// keyedProvider marks any provider as deduplicated by key.
type keyedProvider struct{ dispatcher.Provider }

func (keyedProvider) Idempotent() bool { return true }
