package readdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// hoursUnlikeMinutesSQL counts the hour rows (counts, backlog samples and
// latency slots) that differ from the sums of their minutes' rows (the
// largest sample for the backlog and the oldest due age), either way.
const hoursUnlikeMinutesSQL = `
WITH m AS (
    SELECT channel, date_trunc('hour', minute, 'UTC') AS hour, sum(sent) AS sent, sum(failed) AS failed,
           sum(in_doubt) AS in_doubt, sum(skipped) AS skipped, sum(accepted) AS accepted, sum(delivered) AS delivered,
           sum(undelivered) AS undelivered, sum(provider_errors) AS provider_errors, sum(backoffs) AS backoffs,
           max(backlog) AS backlog, max(oldest_due_seconds) AS oldest_due_seconds
    FROM effectd.minute_rollups GROUP BY 1, 2
), l AS (
    SELECT channel, date_trunc('hour', minute, 'UTC') AS hour, slot, sum(n) AS n FROM effectd.minute_latency GROUP BY 1, 2, 3
)
SELECT (SELECT count(*) FROM m FULL JOIN effectd.hour_rollups h USING (channel, hour)
        WHERE (m.sent, m.failed, m.in_doubt, m.skipped, m.accepted, m.delivered, m.undelivered, m.provider_errors,
               m.backoffs, m.backlog, m.oldest_due_seconds)
              IS DISTINCT FROM (h.sent, h.failed, h.in_doubt, h.skipped, h.accepted, h.delivered, h.undelivered,
               h.provider_errors, h.backoffs, h.backlog, h.oldest_due_seconds))
     + (SELECT count(*) FROM l FULL JOIN effectd.hour_latency h USING (channel, hour, slot) WHERE l.n IS DISTINCT FROM h.n)`

// hourHistory folds a known history into the rollups through the
// statements that write them: two folds over three minutes on both sides of
// an hour's end, two channels, and backlog samples (an earlier minute of the
// current hour, then two samples of the current minute, the later
// replacing the first). It returns the first hour.
func hourHistory(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	first, last, next := hour, hour.Add(59*time.Minute), hour.Add(time.Hour)
	d := func(channel string, at time.Time, measure string, slot int16, n int64) RollupDelta {
		return RollupDelta{Channel: channel, Minute: at, Measure: measure, Slot: slot, N: n}
	}
	for _, fold := range [][]RollupDelta{
		{d("sms", first, "sent", 0, 5), d("sms", first, "failed", 0, 1), d("sms", first, "latency", 20, 6),
			d("sms", last, "sent", 0, 2), d("sms", last, "backoffs", 0, 3), d("sms", last, "latency", 20, 1),
			d("sms", next, "sent", 0, 7), d("sms", next, "latency", 24, 2), d("refund", last, "sent", 0, 4),
			d("refund", last, "delivered", 0, 4), d("refund", last, "latency", 20, 4)},
		{d("sms", last, "sent", 0, 1), d("sms", first, "latency", 21, 1), d("refund", next, "in_doubt", 0, 1)},
	} {
		if err := AddRollups(ctx, pool, fold); err != nil {
			t.Fatal(err)
		}
	}
	fixture.AddMinuteRollups(t, pool, 1, func(int) fixture.Rollup {
		return fixture.Rollup{Channel: "sms", At: time.Now().UTC().Truncate(time.Hour), Backlog: 50, OldestDueSeconds: 600}
	})
	for _, backlog := range []int64{9, 4} {
		if err := SampleBacklog(ctx, pool, []BacklogSample{{Channel: "sms", Backlog: backlog, OldestDueSeconds: 30}}); err != nil {
			t.Fatal(err)
		}
	}
	return hour
}

// TestHourRollupsSumTheMinutes: the hour rollups the 24 h and 7 d charts
// read hold, for a known history, the sums of their minutes' rollups
// (counts and latency slots, per channel and for the whole system) and the
// largest of their minutes' backlog samples; a 7 d chart of hours shows the
// history's numbers; and an hour is pruned with its last minute.
func TestHourRollupsSumTheMinutes(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	hour := hourHistory(t, pool)
	var unlike int
	if err := pool.QueryRow(ctx, hoursUnlikeMinutesSQL).Scan(&unlike); err != nil {
		t.Fatal(err)
	}
	if unlike != 0 {
		t.Errorf("%d hour rows differ from the sums of their minutes", unlike)
	}
	to := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	points, slots, err := ChartRows(ctx, pool, []string{AllChannels}, to.Add(-7*24*time.Hour), to, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := map[time.Time][3]int64{} // sent, in doubt, decided
	for _, p := range points {
		got[p.At.UTC()] = [3]int64{p.Sent, p.InDoubt, got[p.At.UTC()][2]}
	}
	for _, s := range slots {
		g := got[s.At.UTC()]
		g[2] += s.N
		got[s.At.UTC()] = g
	}
	if want := [3]int64{12, 0, 12}; got[hour] != want {
		t.Errorf("the 7 d chart's hour %s: sent, in doubt, decided %v, want %v", hour.Format("15:04"), got[hour], want)
	}
	if want := [3]int64{7, 1, 2}; got[hour.Add(time.Hour)] != want {
		t.Errorf("the 7 d chart's hour %s: sent, in doubt, decided %v, want %v", hour.Add(time.Hour).Format("15:04"), got[hour.Add(time.Hour)], want)
	}
	for _, c := range []struct {
		before time.Time
		want   int
	}{{hour.Add(30 * time.Minute), 1}, {hour.Add(time.Hour), 0}} {
		if err := PruneRollups(ctx, pool, c.before); err != nil {
			t.Fatal(err)
		}
		var kept int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.hour_rollups WHERE channel = 'sms' AND hour = $1`, hour).Scan(&kept); err != nil {
			t.Fatal(err)
		}
		if kept != c.want {
			t.Errorf("pruned before %s: %d rows of the hour %s kept, want %d", c.before.Format("15:04"), kept, hour.Format("15:04"), c.want)
		}
	}
}
