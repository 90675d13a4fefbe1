package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// staleRig runs one dispatcher on channels c and d whose policies and pause
// flags it rereads only once an hour: what it does about a pause can only come
// from the claim statement itself.
func staleRig(t *testing.T, pol policy.Policy) (rig, *scripted) {
	t.Helper()
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "ref", nil }}
	pool := pgtest.New(t)
	var chans []dispatcher.Channel
	for _, name := range []string{"c", "d"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: "webhook", Provider: keyedProvider{p}, Policy: pol})
	}
	d := run(t, pool, dispatcher.Config{Channels: chans, RefreshInterval: time.Hour})
	return rig{pool: pool, d: d}, p
}

func setPaused(t *testing.T, pool *pgxpool.Pool, channel string, paused bool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE effectd.channels SET paused = $2 WHERE name = $1`, channel, paused); err != nil {
		t.Fatal(err)
	}
}

// TestPauseTakesEffectInTheClaim: once a pause has committed, the very next
// claim of that channel takes nothing, although this dispatcher has not reread
// the flag (and will not for an hour).
func TestPauseTakesEffectInTheClaim(t *testing.T) {
	t.Parallel()
	r, p := staleRig(t, fastPolicy("webhook"))
	setPaused(t, r.pool, "c", true)
	if dispatcher.Paused(r.d, "c") {
		t.Fatal("the dispatcher saw the pause: this test needs its flag stale")
	}
	r.enqueue(t, "held")
	// Two intents on the other channel, one after the other: the claim round
	// that sends the second started after the first was sent, so after "held"
	// was committed, and it claimed for c too.
	for _, probe := range []string{"probe-1", "probe-2"} {
		if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: probe, Channel: "d", Payload: `{}`}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		r.waitStatus(t, probe, "SENT")
	}
	if got := r.row(t, "held"); got.Status != "PENDING" || p.Calls("c:held") != 0 {
		t.Fatalf("a paused channel's intent was claimed: %+v, %d calls", got, p.Calls("c:held"))
	}
	setPaused(t, r.pool, "c", false)
	r.waitStatus(t, "held", "SENT")
}

// TestPauseRacingAClaim: a claim statement that began before a pause committed
// (its snapshot says "not paused") and is still running when the pause returns
// must not claim anything. The test holds the channel's rate tokens' row so that a
// claim is caught mid-statement, pauses, then lets the claim go on.
func TestPauseRacingAClaim(t *testing.T) {
	t.Parallel()
	pol := fastPolicy("webhook")
	pol.RatePerSecond = 1000
	r, p := staleRig(t, pol)
	ctx := context.Background()
	// An empty bucket for the next hour: the dispatcher claims nothing, but
	// keeps trying.
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.rate_buckets SET tokens = -3600000, at = clock_timestamp() WHERE channel = 'c'`); err != nil {
		t.Fatal(err)
	}
	r.enqueue(t, "e1", "e2", "e3")

	// Refill the bucket in a transaction that holds its row: the next claim
	// of c, whose snapshot has the three intents due and c not paused, waits.
	refill, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer refill.Rollback(ctx)
	if _, err := refill.Exec(ctx, `UPDATE effectd.rate_buckets SET tokens = 100, at = clock_timestamp() WHERE channel = 'c'`); err != nil {
		t.Fatal(err)
	}
	// (the claim is told by the start of its text: pg_stat_activity keeps
	// only the first track_activity_query_size bytes of a statement)
	waiting := func(like string) bool {
		var n int
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, like).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	eventually(t, 10*time.Second, "a claim of c waits for the bucket", func() bool { return waiting("-- Claim up to%") })

	// Pause. The pause may have to wait for the claim (when the claim holds
	// the channel row already); then it returns only after the claim ends.
	paused := make(chan map[string]string, 1)
	go func() {
		if _, err := r.pool.Exec(ctx, `UPDATE effectd.channels SET paused = true WHERE name = 'c'`); err != nil {
			t.Error(err)
		}
		paused <- statuses(t, r.pool) // what was claimed when the pause returned
	}()
	var atPause map[string]string
	eventually(t, 10*time.Second, "the pause returned or waits for the claim", func() bool {
		select {
		case atPause = <-paused:
			return true
		default:
			return waiting("UPDATE effectd.channels SET paused%")
		}
	})
	if err := refill.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if atPause == nil {
		atPause = <-paused
	}
	eventually(t, 10*time.Second, "no claim of c waits any more", func() bool { return !waiting("-- Claim up to%") })
	// Every later claim reads the pause: give the dispatcher rounds to prove it
	// by sending on the other channel.
	for _, probe := range []string{"probe-1", "probe-2"} {
		if ok, err := enqueue(t, r.pool, dispatcher.Intent{EventID: probe, Channel: "d", Payload: `{}`}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		r.waitStatus(t, probe, "SENT")
	}
	after := statuses(t, r.pool)
	for _, e := range []string{"e1", "e2", "e3"} {
		if atPause[e] == "PENDING" && after[e] != "PENDING" {
			t.Errorf("%s was PENDING when the pause returned and is %s now (%d calls): claimed after the pause", e, after[e], p.Calls("c:"+e))
		}
	}
}

// statuses returns the status of every intent by event id.
func statuses(t *testing.T, pool *pgxpool.Pool) map[string]string {
	rows, err := pool.Query(context.Background(), `SELECT event_id, status FROM effectd.intents`)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var e, s string
		if err := rows.Scan(&e, &s); err != nil {
			t.Error(err)
			return nil
		}
		out[e] = s
	}
	return out
}
