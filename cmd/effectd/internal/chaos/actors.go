package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
)

// The randomized checker's actors (Config.Actors, `effectd check`), beside
// the producers and the fault schedule of every chaos run:
//   - producers at a random isolation level (READ COMMITTED, REPEATABLE READ,
//     SERIALIZABLE), retrying 40001 as a producer would, some redelivering an
//     event from a concurrent transaction at the same moment;
//   - a moved clock: some producers' transactions move the intent they made,
//     and its dedupe key, a UTC day back (into yesterday: older than every
//     sweep window of the run) or a day ahead (into tomorrow's partition, so
//     that the event's redeliveries run in another day's partition than its
//     intent). The database's now() cannot be moved; the producer's
//     transaction is made to have run on another day instead, before it
//     commits, so nothing else ever sees the row on today;
//   - one producer enqueuing BatchEvents events in one transaction, then
//     rolling back (a bulk import cancelled), which must not run out of any
//     shared resource;
//   - producers enqueueing through enqueue_many, some several deliveries in
//     one transaction, and producers cancelling their own intents
//     (verbs.go);
//   - operators through an instance's admin API: retry (requeue), retry with
//     force, resolve as sent, resend or skip, bulk retry and bulk resend by an
//     event id prefix, and reconcile (a lookup now);
//   - retention rounds racing an operator's requeue (retention.go);
//   - provider events and callbacks through the instances' ingress, and an
//     intent id handed to another intent before a callback (ingress.go,
//     reuse.go);
//   - after the drain, sweeps of every Stripe and Twilio channel over the
//     whole history, today's window, yesterday's, and random windows of the
//     run (see checkSweeps).
// Every operation is recorded in the History with what it asked and what it
// got; the checker judges the run with it.

// BatchEvents is the default size of the rolled-back batch (Config.Batch):
// one transaction enqueuing this many events.
const BatchEvents = 20000

// Isolation levels the producers draw from.
var isolationLevels = []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}

// planActors gives each delivery an isolation level, moves some events' intents
// a day back or ahead (each such event delivered again, at once from a
// concurrent transaction and a little later), and delivers some other events
// twice at the same moment. It draws from its own rng, so that the plan of
// a run without actors is unchanged.
func planActors(rng *rand.Rand, ds []delivery) []delivery {
	byEvent := map[string][]int{}
	var order []string
	for i, d := range ds {
		if byEvent[d.eventID] == nil {
			order = append(order, d.eventID)
		}
		byEvent[d.eventID] = append(byEvent[d.eventID], i)
	}
	var extra []delivery
	for _, ev := range order {
		idx := byEvent[ev]
		move := 0
		switch r := rng.Float64(); {
		case r < 0.12:
			move = -1
		case r < 0.24:
			move = 1
		}
		for _, i := range idx {
			ds[i].iso = isolationLevels[rng.IntN(len(isolationLevels))]
			ds[i].moveDays = move
		}
		first := ds[idx[0]]
		if first.rollback && len(idx) == 2 && ds[idx[1]].rollback {
			continue // an event that only ever rolls back stays so
		}
		twin := func(at time.Duration) {
			d := first
			d.at, d.rollback = at, false
			d.iso = isolationLevels[rng.IntN(len(isolationLevels))]
			extra = append(extra, d)
		}
		switch {
		case move == 1:
			// the redelivery that meets the intent in another day's partition
			twin(first.at)
			twin(first.at + time.Duration(200+rng.IntN(1500))*time.Millisecond)
		case rng.Float64() < 0.10:
			twin(first.at) // a concurrent redelivery
		}
	}
	out := append(ds, extra...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].at < out[b].at })
	return out
}

// moveIntent moves the intent d's transaction made, and its dedupe key, by
// d.moveDays UTC days, in that transaction: the moved clock. The new time is
// read first and written as a value: Citus refuses an UPDATE that calls a
// STABLE function (timestamptz + interval) on a column (0A000).
func moveIntent(ctx context.Context, tx pgx.Tx, d delivery, buckets int) error {
	const (
		movedSQL  = `SELECT created_at + make_interval(days => $3::int) FROM effectd.intents WHERE event_id = $1 AND channel = $2`
		intentSQL = `UPDATE effectd.intents SET created_at = $3 WHERE event_id = $1 AND channel = $2`
		keySQL    = `UPDATE effectd.dedupe_keys SET day = day + $3::int, until = until + $3::int
			WHERE key = effectd.dedupe_key($2, $1)`
	)
	args := []any{d.eventID, d.channel, d.moveDays}
	onBucket := ""
	if buckets > 0 {
		args, onBucket = append(args, bucketOf(d.eventID, buckets)), " AND bucket = $4"
	}
	var moved time.Time
	if err := tx.QueryRow(ctx, movedSQL+onBucket, args...).Scan(&moved); err != nil {
		return fmt.Errorf("reading the intent to move: %w", err)
	}
	if _, err := tx.Exec(ctx, intentSQL+onBucket, append([]any{d.eventID, d.channel, moved}, args[3:]...)...); err != nil {
		return fmt.Errorf("moving the intent %d days: %w", d.moveDays, err)
	}
	_, err := tx.Exec(ctx, keySQL+onBucket, args...)
	return err
}

// refused records err's SQLSTATE against ev when it is one that a producer
// cannot retry its way out of: anything but a serialization failure or
// deadlock (40), the server going away (57, 08), or no answer at all.
func (l *Log) refused(ev string, err error) {
	state, bad := refusal(err)
	if !bad {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusal[state] = append(l.refusal[state], ev)
}

// refusal returns err's SQLSTATE and whether it is a refusal no retry cures.
// Citus reports a worker connection lost inside a transaction (a worker
// restarted under it) as XX000, with no SQLSTATE of its own: "failure on
// connection marked as essential", or the worker's own shutdown message
// relayed ("terminating connection due to administrator command", 57P01 on
// the worker). That is the server going away, as 57 and 08 are on one node,
// and a producer retries it.
func refusal(err error) (string, bool) {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return "", false
	}
	switch pg.Code[:2] {
	case "40", "57", "08":
		return pg.Code, false
	}
	if pg.Code == "XX000" && slices.ContainsFunc(citusWorkerGone, func(m string) bool { return strings.HasPrefix(pg.Message, m) }) {
		return pg.Code, false
	}
	return pg.Code + " " + pg.Message, true
}

// citusWorkerGone are the messages of the XX000 errors with which Citus
// fails a transaction whose worker went away under it.
var citusWorkerGone = []string{
	"failure on connection marked as essential",
	"terminating connection due to administrator command",
}

// bigBatch enqueues n events on channel in one transaction, in one statement,
// then rolls back. It returns the SQLSTATE and message of a refusal no
// retry cures, or "" (a fault, such as a restart, is retried once).
func bigBatch(ctx context.Context, pool *pgxpool.Pool, channel string, n, buckets int) (string, error) {
	const batchSQL = `SELECT count(*) FILTER (WHERE effectd.enqueue(event_id => 'batch-' || g, channel => $1,
		payload => jsonb_build_object('event', 'batch-' || g), bucket => CASE WHEN $3 > 0 THEN g % $3 END))
		FROM generate_series(1, $2) g`
	var last error
	for range 2 {
		tx, err := pool.Begin(ctx)
		if err != nil {
			last = err
			continue
		}
		var inserted int
		err = tx.QueryRow(ctx, batchSQL, channel, n, buckets).Scan(&inserted)
		tx.Rollback(context.WithoutCancel(ctx))
		if err == nil {
			return "", nil
		}
		if state, bad := refusal(err); bad {
			return state, nil
		}
		last = err
	}
	return "", last
}

// Op is one operation of the history: who asked what about which intent,
// and what came of it.
type Op struct {
	At       time.Time
	Actor    string // producer | operator | sweep
	Action   string
	Channel  string
	Event    string   // the event the operation is about ("" for none)
	Events   []string // a bulk action: every event its filter may reach
	IntentID int64
	Result   string // ok | refused | unknown (no answer: it may have been applied)
	Detail   string
}

// History is the record of the actors' operations. It is safe for concurrent use.
type History struct {
	mu  sync.Mutex
	ops []Op
}

func (h *History) add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns a copy of the operations, in the order they ended.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Operator actions.
const (
	actRetry        = "retry"
	actRetryForce   = "retry --force"
	actResolveSent  = "resolve sent"
	actResolveAgain = "resolve resend"
	actResolveSkip  = "resolve skip"
	actBulkRetry    = "bulk retry"
	actBulkResend   = "bulk resolve resend"
	actReconcile    = "reconcile"
)

// mayResend reports whether action may make its intent call the provider again.
func mayResend(action string) bool {
	switch action {
	case actRetry, actRetryForce, actResolveAgain, actBulkRetry, actBulkResend, actReconcile:
		return true
	}
	return false
}

// operator acts on intents through an instance's admin API on a seeded
// schedule, and records each action in the history.
type operator struct {
	rng       *rand.Rand
	instances []*instance
	chans     []Channel
	hist      *History
	note      func(format string, args ...any)
}

// operatorActions are drawn with these weights.
var operatorActions = []struct {
	action string
	weight int
	status string // the status of the intents it acts on
}{
	{actRetry, 3, "FAILED"}, {actRetry, 2, "SKIPPED"}, {actRetry, 2, "IN_DOUBT"}, {actRetryForce, 1, "IN_DOUBT"},
	{actResolveSent, 1, "IN_DOUBT"}, {actResolveAgain, 2, "IN_DOUBT"}, {actResolveSkip, 1, "IN_DOUBT"},
	{actBulkRetry, 1, "FAILED"}, {actBulkResend, 1, "IN_DOUBT"}, {actReconcile, 2, "SENT"},
}

// run acts every 200–900 ms until ctx ends.
func (o *operator) run(ctx context.Context) {
	total := 0
	for _, a := range operatorActions {
		total += a.weight
	}
	for {
		gap := time.Duration(200+o.rng.IntN(700)) * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		r := o.rng.IntN(total)
		i := 0
		for r >= operatorActions[i].weight {
			r -= operatorActions[i].weight
			i++
		}
		a := operatorActions[i]
		p := o.instances[o.rng.IntN(len(o.instances))]
		addr, _ := p.addr.Load().(string)
		if addr == "" {
			continue
		}
		c := &client.Client{BaseURL: addr, HTTP: newHTTPClient()}
		pick := o.rng.Uint64()
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		o.act(actx, c, a.action, a.status, pick)
		cancel()
	}
}

// act lists the intents in status and carries out action on the one
// pick chooses (a bulk action: on the events sharing its event id's prefix).
func (o *operator) act(ctx context.Context, c *client.Client, action, status string, pick uint64) {
	page, err := c.ListIntents(ctx, client.Filter{Status: status, Limit: 50})
	if err != nil {
		return
	}
	// the old intents are the retention rounds' (retention.go): a change
	// of one would hold its partition before the round
	list := slices.DeleteFunc(page.Intents, func(in effectdtype.IntentRow) bool { return strings.HasPrefix(in.EventID, "old-") })
	if len(list) == 0 {
		return
	}
	in := list[pick%uint64(len(list))]
	op := Op{At: time.Now(), Actor: "operator", Action: action, Channel: in.Channel, Event: in.EventID, IntentID: in.ID}
	reason := "chaos check: " + action
	var got effectdtype.IntentRow
	switch action {
	case actRetry, actRetryForce:
		got, err = c.Retry(ctx, in.ID, reason, action == actRetryForce)
	case actResolveSent:
		got, err = c.Resolve(ctx, in.ID, client.Resolution{As: "sent", Reason: reason})
	case actResolveAgain:
		got, err = c.Resolve(ctx, in.ID, client.Resolution{As: "resend", Reason: reason})
	case actResolveSkip:
		got, err = c.Resolve(ctx, in.ID, client.Resolution{As: "skip", Reason: reason})
	case actReconcile:
		var s client.ReconcileResult
		s, err = c.Reconcile(ctx, in.ID, false)
		op.Detail = fmt.Sprintf("%+v", s)
		got = in // a settlement names no row; the fence check is the audit's
	case actBulkRetry, actBulkResend:
		op.Event = ""
		op.Events, err = o.bulk(ctx, c, action, status, in, reason, &op)
	}
	switch {
	case err == nil:
		op.Result = "ok"
		if op.Event != "" && (got.EventID != in.EventID || got.Channel != in.Channel) {
			op.Detail = fmt.Sprintf("answered with intent %d of %s/%s", got.ID, got.Channel, got.EventID)
		}
	case isRefusal(err):
		op.Result, op.Detail = "refused", err.Error()
	default:
		op.Result, op.Detail = "unknown", err.Error()
	}
	o.hist.add(op)
}

// bulk freezes the intents of in's channel in status whose event id shares
// in's prefix but for its last digit (ten events at most), applies the
// snapshot, and returns the events the filter reaches.
func (o *operator) bulk(ctx context.Context, c *client.Client, action, status string, in effectdtype.IntentRow, reason string, op *Op) ([]string, error) {
	prefix := in.EventID[:len(in.EventID)-1]
	req := client.BulkRequest{Action: "retry", Reason: reason,
		Filter: client.BulkFilter{Status: status, Channel: in.Channel, EventIDPrefix: prefix}}
	if action == actBulkResend {
		req.Action, req.As = "resolve", "resend"
	}
	var events []string
	for d := range 10 {
		events = append(events, fmt.Sprintf("%s%d", prefix, d))
	}
	snap, err := c.Bulk(ctx, req)
	if err != nil {
		return events, err
	}
	res, err := c.ApplyBulk(ctx, snap.Snapshot)
	op.Detail = fmt.Sprintf("matched %d, %+v", snap.Matched, res)
	return events, err
}

// isRefusal reports whether err is an answer of the API (the action was
// refused, nothing changed) rather than no answer.
func isRefusal(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status < 500
}

// newHTTPClient is the operators' HTTP client: short timeouts, no pooling
// across instances that restart.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, DisableKeepAlives: true}}
}

// decisions is what the history says about each target: the operator
// actions that may have sent it again, and those that resolved it as sent.
type decisions struct {
	resends map[target]int
	sent    map[target]bool
	touched map[target]bool // every target an operator action named or reached
	named   map[target]bool // touched, and every target a producer's cancel named (its audit entry's)
}

// decide reads the history's operator actions that were applied or may have
// been (no answer).
func decide(ops []Op) decisions {
	d := decisions{resends: map[target]int{}, sent: map[target]bool{}, touched: map[target]bool{}, named: map[target]bool{}}
	for _, op := range ops {
		if op.Actor == "producer" && op.Action == actCancel && op.Result != "refused" {
			d.named[target{op.Channel, op.Event}] = true
		}
		if op.Actor != "operator" || op.Result == "refused" {
			continue
		}
		events := op.Events
		if op.Event != "" {
			events = []string{op.Event}
		}
		for _, ev := range events {
			t := target{op.Channel, ev}
			d.touched[t], d.named[t] = true, true
			if mayResend(op.Action) {
				d.resends[t]++
			}
			if op.Action == actResolveSent {
				d.sent[t] = true
			}
		}
	}
	return d
}

// summary counts the history's operations by actor, action and result.
func summary(ops []Op) string {
	n := map[string]int{}
	for _, op := range ops {
		n[op.Actor+" "+op.Action+": "+op.Result]++
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&b, "  %s ×%d\n", k, n[k])
	}
	return b.String()
}

// operators runs the operators until ctx ends.
func (h *harness) operators(ctx context.Context) {
	o := &operator{rng: rand.New(rand.NewPCG(h.cfg.Seed, 4)), instances: h.instances, chans: h.cfg.Channels, hist: &h.hist, note: h.note}
	o.run(ctx)
}

// batch runs the rolled-back batch once, at a seeded moment of the first
// half of the fault phase, on the first channel.
func (h *harness) batch(ctx context.Context, rng *rand.Rand) {
	at := time.Duration(rng.Float64() * float64(h.cfg.Duration/2))
	select {
	case <-ctx.Done():
		return
	case <-time.After(at):
	}
	start := time.Now()
	state, err := bigBatch(context.WithoutCancel(ctx), h.pool, h.cfg.Channels[0].Name, h.cfg.Batch, h.buckets())
	op := Op{At: time.Now(), Actor: "producer", Action: fmt.Sprintf("batch of %d, rolled back", h.cfg.Batch), Channel: h.cfg.Channels[0].Name, Result: "ok"}
	switch {
	case state != "":
		op.Result, op.Detail = "refused", state
	case err != nil:
		op.Result, op.Detail = "unknown", err.Error()
	}
	h.note("batch of %d enqueues in one transaction, rolled back after %s: %s %s", h.cfg.Batch, time.Since(start).Round(time.Millisecond), op.Result, op.Detail)
	h.hist.add(op)
}

// refusals returns a copy of the producers' refusals, by SQLSTATE.
func (l *Log) refusals() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.refusal)
}
