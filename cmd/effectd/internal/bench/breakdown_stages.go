package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stage is one stage of a live event's way, with its duration for every
// event recorded.
type stage struct {
	name string
	from string // where its two ends are recorded
	d    []time.Duration
}

// q is the p-quantile of the stage's durations, in ms.
func (s stage) q(p float64) float64 {
	if len(s.d) == 0 {
		return 0
	}
	d := slices.Sorted(slices.Values(s.d))
	return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond)
}

// arrivals keeps when the sandbox first received each call, by webhook-id.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *arrivals) see(key string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.at[key]; !ok {
		a.at[key] = at
	}
}

func (a *arrivals) get(key string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[key]
	return t, ok
}

// stageNames are the stages in the order of an event's way, with where their
// ends are recorded. The last two are totals.
var stageNames = [][2]string{
	{"commit → claim starts", "producer's commit returned (bench clock) → intents.claimed_at, the claim transaction's now(); the wake-up is inside, not recorded apart"},
	{"claim starts → call starts", "intents.claimed_at → attempts.started_at (serve's clock): the claim statement, its commit, the hand-off to a sender"},
	{"call starts → provider receives", "attempts.started_at → the receiver's arrival (bench clock): request, signing, HTTP over loopback"},
	{"provider receives → answer back", "the receiver's arrival → attempts.finished_at: the receiver's work, the HTTP answer, its reading"},
	{"answer back → completion starts", "attempts.finished_at → intents.updated_at, the completion transaction's now(): the wait for the completer's batch"},
	{"total: commit → provider receives", "what the live scenario reports as commit → provider"},
	{"total: commit → completion starts", "the completion's commit is not recorded anywhere; add its statement's time from the drain's table"},
}

// liveByStage reads, for every event of the live run lv, the timestamps its
// intent and first attempt keep, and splits its way into stages with the
// provider's arrival times. It polls until every event's attempt is written,
// or for stagesWait.
func liveByStage(ctx context.Context, pool *pgxpool.Pool, lv lived, arrived *arrivals) ([]stage, int, error) {
	out := make([]stage, len(stageNames))
	deadline := time.Now().Add(stagesWait)
	for {
		for i, n := range stageNames {
			out[i] = stage{name: n[0], from: n[1]}
		}
		recorded := 0
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_nestloop = off`); err != nil { // as liveStages: fresh partitions lack statistics
				return err
			}
			rows, err := tx.Query(ctx, `
				SELECT i.event_id, i.claimed_at, a.started_at, a.finished_at, i.updated_at
				FROM effectd.intents i
				JOIN effectd.attempts a ON a.intent_id = i.id AND a.attempt = 1 AND a.kind = 'send' AND a.started_at >= $2
				WHERE i.channel = 'bench' AND i.created_at >= $2 AND i.event_id LIKE $1 || '%'`, lv.prefix, lv.start.Add(-time.Minute))
			if err != nil {
				return err
			}
			var id string
			var claimed, started, finished, updated time.Time
			_, err = pgx.ForEachRow(rows, []any{&id, &claimed, &started, &finished, &updated}, func() error {
				var i int
				if _, err := fmt.Sscanf(strings.TrimPrefix(id, lv.prefix), "%d", &i); err != nil || i >= len(lv.commits) {
					return fmt.Errorf("event %q", id)
				}
				arrival, ok := arrived.get("bench:" + id)
				if !ok {
					return nil // an attempt the provider never saw: none here, the run checked every arrival
				}
				commit := lv.commits[i]
				for s, d := range []time.Duration{claimed.Sub(commit), started.Sub(claimed), arrival.Sub(started),
					finished.Sub(arrival), updated.Sub(finished), arrival.Sub(commit), updated.Sub(commit)} {
					out[s].d = append(out[s].d, d)
				}
				recorded++
				return nil
			})
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("live stages: %w", err)
		}
		if recorded >= len(lv.commits) || time.Now().After(deadline) {
			return out, recorded, nil
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling the completers' writes, with a deadline
		}
	}
}
