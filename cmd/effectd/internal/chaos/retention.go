package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage"
)

// Retention racing operators (Config.Actors, one PostgreSQL): the database is
// given a day partition for each of the retentionDays days before today, as
// a deployment has once it has run that long (harnessdb.DayPartitions), and the
// days from 2 to retentionDays back are given oldPerDay FAILED intents of the
// hook channel, written as if their producers had enqueued them then and the
// provider had refused them for good. During the fault phase, retention
// rounds drop the day partitions that expired (dispatcher.DropExpiredPartitions,
// the pruner's path) with a horizon that makes one more old day expire each
// round, while an operator requeues one of that day's intents:
//   - one by one (most rounds): a transaction reads provider_events, so the
//     three tables' locks are not free together, and another holds the
//     target partition's SHARE UPDATE EXCLUSIVE lock (as autovacuum may), so
//     that its detach waits after the partition's first check; the requeue
//     is made while the detach waits, then both locks are released;
//   - together: the requeue is made at a random moment of the drop.
// An intent an operator made live must not go with its partition: the
// checker flags an old intent that is gone although the audit or the history
// shows an operator action on it (judgeRetention). An old intent no operator
// touched may go; its event is then counted as pruned, not lost.

// retentionDays is how many days back the run's day partitions begin; the
// rounds target the days in retentionTargets.
const (
	retentionDays = 7
	oldPerDay     = 4
)

// retentionTargets are the days back each round makes expire, in order.
var retentionTargets = []int{7, 6, 5, 4, 3, 2}

// retentionRuns reports whether the run has the retention actor: with
// actors, on one PostgreSQL (the distributed mode drops partitions on every
// shard: its path is the dispatcher's tests').
func (h *harness) retentionRuns() bool { return h.cfg.Actors && h.citus == nil && !h.cfg.Citus }

// oldDays gives the fresh database its day partitions back to retentionDays
// days ago; before the instances start.
func (h *harness) oldDays(ctx context.Context) error {
	if !h.retentionRuns() {
		return nil
	}
	if err := harnessdb.DayPartitions(ctx, h.pool, retentionDays); err != nil {
		return fmt.Errorf("chaos: day partitions for retention: %w", err)
	}
	return nil
}

// seedOld writes the old FAILED intents of the hook channel (internal/fixture,
// with their dedupe keys, as effectd.enqueue wrote them then): oldPerDay on
// each day from 2 to retentionDays back, an hour after its midnight. It
// records their events in log as committed, each once, on a day retention
// may drop (Outcome.Expires).
func (h *harness) seedOld(ctx context.Context, log *Log) error {
	ch := h.cfg.Channels[0].Name // the webhook channel: no sweep judges it
	var olds []fixture.IntentRow
	err := fixture.Make(func(t fixture.TB) {
		olds = fixture.Intents(t, h.pool, (retentionDays-1)*oldPerDay, func(n int) []fixture.IntentOption {
			d, i := 2+(n-1)/oldPerDay, (n-1)%oldPerDay
			event, created := fmt.Sprintf("old-%d-%d", d, i), fixture.Day(-d).Add(time.Hour)
			return []fixture.IntentOption{fixture.Channel(ch), fixture.Event(event), fixture.Status("FAILED"),
				fixture.Payload(fmt.Sprintf(`{"event": %q, "n": %d}`, event, i)), fixture.CreatedAt(created),
				fixture.UpdatedAt(created)}
		})
	})
	if err != nil {
		return fmt.Errorf("chaos: old intents: %w", err)
	}
	h.old = map[int64]target{}
	for _, o := range olds {
		h.old[o.ID] = target{ch, o.EventID}
		log.update(o.EventID, ch, func(out *Outcome) {
			out.Committed, out.Inserted, out.Deliveries, out.Expires = true, 1, 1, true
		})
	}
	return nil
}

// retention runs the rounds at seeded moments of the fault phase (window).
func (h *harness) retention(ctx context.Context, rng *rand.Rand, window time.Duration) {
	rpcfg, err := pgxpool.ParseConfig(h.dsn)
	if err != nil {
		h.note("retention: %v", err)
		return
	}
	rpcfg.MaxConns = 6
	rp, err := pgxpool.NewWithConfig(ctx, rpcfg)
	if err != nil {
		h.note("retention: %v", err)
		return
	}
	defer rp.Close()
	begun := time.Now()
	for r, back := range retentionTargets {
		at := window * time.Duration(r+1) / time.Duration(len(retentionTargets)+1)
		at += time.Duration(rng.Float64() * float64(window/time.Duration(4*len(retentionTargets))))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(begun.Add(at))):
		}
		// a round once begun ends on its own, so that no detach is left half way
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		h.retentionRound(rctx, rp, back, rng.Float64() < 0.75, rng.Uint64())
		cancel()
	}
}

// retentionRound drops the partitions that ended by the end of the day back
// days ago while an operator requeues one of that day's FAILED intents
// (see the comment at the top).
func (h *harness) retentionRound(ctx context.Context, rp *pgxpool.Pool, back int, oneByOne bool, pick uint64) {
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -back)
	part := "intents_p" + day.Format("20060102")
	// partitions ending by day+1 expire; a row changed after day+1 01:00 holds its partition
	horizon := time.Since(day.Add(25 * time.Hour))
	mode := "together"
	if oneByOne {
		mode = "one by one"
	}
	target, err := failedOn(ctx, rp, day, pick)
	if err != nil {
		h.note("retention round on %s: no FAILED intent to requeue (%v)", part, err)
		return
	}

	var blockers []pgx.Tx
	release := func() {
		for _, tx := range blockers {
			tx.Rollback(context.WithoutCancel(ctx))
		}
		blockers = nil
	}
	defer release()
	if oneByOne {
		for _, sql := range []string{`SELECT count(*) FROM effectd.provider_events`,
			`LOCK TABLE ` + pgx.Identifier{"effectd", part}.Sanitize() + ` IN SHARE UPDATE EXCLUSIVE MODE`} {
			tx, err := rp.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, sql)
			}
			if err != nil {
				h.note("retention round on %s: taking a lock: %v", part, err)
				if tx != nil {
					tx.Rollback(ctx)
				}
				return
			}
			blockers = append(blockers, tx)
		}
	}
	done := make(chan dropOutcome, 1)
	began := time.Now()
	go func() {
		// as the pruner does (dispatcher's dropExpired)
		store := storage.New(effectdtype.SingleNode, rp, storage.Leases{})
		err := store.FinishDetaches(ctx)
		var dropped []retentiondb.Partition
		var held int
		if err == nil {
			dropped, held, err = store.DropExpiredPartitions(ctx, horizon)
		}
		done <- dropOutcome{dropped, held, err}
	}()
	var res *dropOutcome
	raced := true
	if oneByOne {
		raced, res = h.waitDetach(ctx, rp, part, done)
	} else {
		time.Sleep(time.Duration(pick%50) * time.Millisecond)
	}
	if raced {
		h.requeueOld(ctx, target.ID, target.Event, part, mode)
	}
	release()
	if res == nil {
		r := <-done
		res = &r
	}
	h.recordRound(part, mode, target.Event, raced, *res, began)
	h.finishDetaches(ctx, rp)
}

// failedIntent is a FAILED intent a retention round has an operator requeue.
type failedIntent struct {
	ID    int64
	Event string
}

// failedOn picks, by pick, one of the FAILED intents created on UTC day day.
func failedOn(ctx context.Context, rp *pgxpool.Pool, day time.Time, pick uint64) (failedIntent, error) {
	rows, err := rp.Query(ctx, `SELECT id, event_id FROM effectd.intents WHERE created_at >= $1 AND created_at < $2 AND status = 'FAILED' ORDER BY id`,
		day, day.Add(24*time.Hour))
	if err != nil {
		return failedIntent{}, err
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowToStructByPos[failedIntent])
	if err != nil {
		return failedIntent{}, err
	}
	if len(candidates) == 0 {
		return failedIntent{}, fmt.Errorf("none on %s", day.Format(time.DateOnly))
	}
	return candidates[pick%uint64(len(candidates))], nil
}

// recordRound adds a retention round's drop to the history and the notes.
func (h *harness) recordRound(part, mode, requeued string, raced bool, res dropOutcome, began time.Time) {
	op := Op{At: time.Now(), Actor: "retention", Action: "drop expired partitions (" + mode + ")", Result: "ok"}
	var names []string
	for _, p := range res.dropped {
		names = append(names, p.Name)
	}
	op.Detail = fmt.Sprintf("%s: dropped %v, held %d, in %s", part, names, res.held, time.Since(began).Round(time.Millisecond))
	if res.err != nil {
		op.Result, op.Detail = "unknown", op.Detail+": "+res.err.Error()
	}
	h.hist.add(op)
	h.note("retention round (%s, requeue of %s raced: %v): %s", mode, requeued, raced, op.Detail)
}

// finishDetaches is the next prune's first step (storage.Engine.FinishDetaches): a
// drop that gave up (its lock not free in time) may leave a partition
// pending detach, its rows out of every query's sight, or detached
// undecided, until then. It tries for up to 20 s.
func (h *harness) finishDetaches(ctx context.Context, rp *pgxpool.Pool) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := storage.New(effectdtype.SingleNode, rp, storage.Leases{}).FinishDetaches(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.note("retention: finishing the detaches: %v", err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dropOutcome is what DropExpiredPartitions returned.
type dropOutcome struct {
	dropped []retentiondb.Partition
	held    int
	err     error
}

// waitDetach polls until a detach of part waits for its lock (after the
// partition's first check), the drop ended (then its outcome is returned),
// or 6 s passed. It reports whether the detach was seen waiting.
func (h *harness) waitDetach(ctx context.Context, rp *pgxpool.Pool, part string, done <-chan dropOutcome) (bool, *dropOutcome) {
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		if err := rp.QueryRow(ctx, detachWaitingSQL, "effectd."+part).Scan(&waiting); err == nil && waiting {
			return true, nil
		}
		select {
		case r := <-done:
			return false, &r
		case <-ctx.Done():
			return false, nil
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false, nil
}

// detachWaitingSQL says whether a session detaching a partition waits for
// partition $1's lock.
const detachWaitingSQL = `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	WHERE l.relation = to_regclass($1) AND NOT l.granted AND a.query ILIKE '%DETACH PARTITION%')`

// requeueOld requeues old intent id through an instance's admin API, as an
// operator, and records it. An instance that cannot be reached (killed or
// restarting: the request never left) is passed over for the next.
func (h *harness) requeueOld(ctx context.Context, id int64, event, part, mode string) {
	op := Op{At: time.Now(), Actor: "operator", Action: actRetry, Channel: h.cfg.Channels[0].Name, Event: event, IntentID: id,
		Detail: "while " + part + " was dropped " + mode}
	actx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	var got effectdtype.IntentRow
	err := errors.New("no instance serves")
	for try := 0; try < 20 && actx.Err() == nil; try++ {
		p := h.instances[try%len(h.instances)]
		addr, _ := p.addr.Load().(string)
		if addr == "" {
			continue
		}
		c := &client.Client{BaseURL: addr, HTTP: newHTTPClient()}
		got, err = c.Retry(actx, id, "chaos check: requeue racing retention", false)
		var dial *net.OpError
		if !errors.As(err, &dial) || dial.Op != "dial" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case err == nil:
		op.Result = "ok"
		if got.ID != id {
			op.Detail = fmt.Sprintf("answered with intent %d of %s/%s", got.ID, got.Channel, got.EventID)
		}
	case isRefusal(err):
		op.Result, op.Detail = "refused", err.Error()
	default:
		op.Result, op.Detail = "unknown", err.Error()
	}
	h.hist.add(op)
	h.note("operator requeue of %s (intent %d) while %s was dropped %s: %s %s", event, id, part, mode, op.Result, op.Detail)
}

// judgeRetention flags each old intent that is gone although an operator
// made it live: the audit holds an entry on its id (an operator action
// writes it in its own transaction), or the history an operator action on
// its event answered ok. An old intent gone with no such action went by
// retention, a recorded policy.
func judgeRetention(ctx context.Context, pool *pgxpool.Pool, old map[int64]target, ops []Op, intents []harnessdb.IntentTally) ([]Violation, error) {
	if len(old) == 0 {
		return nil, nil
	}
	present := map[int64]bool{}
	for _, in := range intents {
		present[in.ID] = true
	}
	var gone []int64
	for id := range old {
		if !present[id] {
			gone = append(gone, id)
		}
	}
	rows, err := pool.Query(ctx, `SELECT DISTINCT intent_id FROM effectd.audit WHERE intent_id = ANY($1)`, gone)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the audit: %w", err)
	}
	audited, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the audit: %w", err)
	}
	live := map[target]bool{} // an operator action answered ok
	for _, op := range ops {
		if op.Actor == "operator" && op.Result == "ok" {
			for _, ev := range append(slices.Clone(op.Events), op.Event) {
				live[target{op.Channel, ev}] = true
			}
		}
	}
	bad := map[[2]string][]string{}
	for _, id := range audited {
		t := old[id]
		rule := [2]string{"lost: made live by an operator (audited), then dropped with its partition by retention", t.channel}
		bad[rule] = append(bad[rule], fmt.Sprintf("%s (intent %d)", t.event, id))
	}
	for _, id := range gone {
		t := old[id]
		if live[t] && !slices.Contains(audited, id) {
			rule := [2]string{"lost: an operator action reached it, then it was dropped with its partition by retention", t.channel}
			bad[rule] = append(bad[rule], fmt.Sprintf("%s (intent %d)", t.event, id))
		}
	}
	return sortedViolations(bad), nil
}
