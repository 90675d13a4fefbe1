package dispatcher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/operator"
)

// rollupScript answers a send by the suffix of its event: ":fail" a
// permanent error (FAILED), ":retry" a retryable error on the first call (a
// back-off) and success on the next, anything else success.
func rollupScript() *scripted {
	return &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch {
		case strings.HasSuffix(key, ":fail"):
			return "", providerErr{}
		case strings.HasSuffix(key, ":retry") && n == 1:
			return "", providerErr{retryable: true}
		}
		return "ref-" + key, nil
	}}
}

// rollupEvents are the events of a known history under rollupScript: plain
// sends, failures and sends retried once.
func rollupEvents() []string {
	var events []string
	for i := range 10 {
		events = append(events, fmt.Sprintf("ok-%d", i))
	}
	for i := range 3 {
		events = append(events, fmt.Sprintf("no-%d:fail", i))
	}
	for i := range 4 {
		events = append(events, fmt.Sprintf("again-%d:retry", i))
	}
	return events
}

// chartTotals sums a chart's points into one, its latency quantiles aside.
func chartTotals(c effectdtype.Chart) effectdtype.ChartPoint {
	var t effectdtype.ChartPoint
	for _, p := range c.Points {
		t.Sent += p.Sent
		t.Failed += p.Failed
		t.InDoubt += p.InDoubt
		t.Skipped += p.Skipped
		t.Accepted += p.Accepted
		t.Delivered += p.Delivered
		t.Undelivered += p.Undelivered
		t.ProviderErrors += p.ProviderErrors
		t.Backoffs += p.Backoffs
		t.Decided += p.Decided
	}
	return t
}

// checkRollups waits for the dispatcher's fold loop to fold the rollups'
// deltas, and compares the charts of channel c, and of the whole system,
// over the last hour (minute rollups) and 24 h and 7 d (hour rollups), with
// the history rollupEvents makes under rollupScript, the deliveries with the
// intents' own; and the hour rollups with the sums of their minutes'.
func checkRollups(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var accepted, delivered int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE delivery = 'accepted'), count(*) FILTER (WHERE delivery = 'delivered')
FROM effectd.intents WHERE channel = 'c'`).Scan(&accepted, &delivered); err != nil {
		t.Fatal(err)
	}
	want := effectdtype.ChartPoint{Sent: 14, Failed: 3, ProviderErrors: 7, Backoffs: 4, Decided: 17,
		Accepted: accepted, Delivered: delivered}
	got := map[string]effectdtype.ChartPoint{}
	var unlike int
	read := func() bool {
		ok := true
		for _, rg := range []string{"1h", "24h", "7d"} {
			for _, channels := range [][]string{{"c"}, nil} {
				chart, err := operator.New(pool, nil).Charts(ctx, channels, rg, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				got[rg+fmt.Sprint(channels)] = chartTotals(chart)
				ok = ok && got[rg+fmt.Sprint(channels)] == want
			}
		}
		if err := pool.QueryRow(ctx, hoursUnlikeMinutesSQL).Scan(&unlike); err != nil {
			t.Fatal(err)
		}
		return ok && unlike == 0
	}
	deadline := time.Now().Add(30 * time.Second) // the fold loop folds every 5 s
	for !read() {
		if time.Now().After(deadline) {
			t.Fatalf("the rollups of 1 h (minutes), 24 h and 7 d (hours), for channel c and the whole system ([])\n got %+v\nwant %+v each; hour rows unlike their minutes' sums: %d",
				got, want, unlike)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hoursUnlikeMinutesSQL counts the hour rollups (migration 027) of channel
// c and of the whole system whose counts and latency slots differ from the
// sums of their minutes'.
const hoursUnlikeMinutesSQL = `
SELECT (SELECT count(*)
        FROM (SELECT channel, date_trunc('hour', minute, 'UTC') AS hour, sum(sent) AS sent, sum(failed) AS failed,
                     sum(provider_errors) AS provider_errors, sum(backoffs) AS backoffs, sum(accepted) AS accepted,
                     sum(delivered) AS delivered
              FROM effectd.minute_rollups WHERE channel IN ('c', '*') GROUP BY 1, 2) m
        FULL JOIN (SELECT * FROM effectd.hour_rollups WHERE channel IN ('c', '*')) h USING (channel, hour)
        WHERE (m.sent, m.failed, m.provider_errors, m.backoffs, m.accepted, m.delivered)
              IS DISTINCT FROM (h.sent, h.failed, h.provider_errors, h.backoffs, h.accepted, h.delivered))
     + (SELECT count(*)
        FROM (SELECT channel, date_trunc('hour', minute, 'UTC') AS hour, slot, sum(n) AS n
              FROM effectd.minute_latency WHERE channel IN ('c', '*') GROUP BY 1, 2, 3) m
        FULL JOIN (SELECT * FROM effectd.hour_latency WHERE channel IN ('c', '*')) h USING (channel, hour, slot)
        WHERE m.n IS DISTINCT FROM h.n)`

// TestRollupsFollowCompletions: the minute rollups the charts read count
// what the dispatcher's completions did (sends, failures, provider errors,
// back-offs, deliveries, a latency for every decision), exactly, for the
// channel and for the whole system.
func TestRollupsFollowCompletions(t *testing.T) {
	r := start(t, "webhook", rollupScript(), fastPolicy("webhook"))
	r.enqueue(t, rollupEvents()...)
	eventually(t, 30*time.Second, "every intent settled", func() bool {
		var live int
		if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.intents WHERE status NOT IN ('SENT', 'FAILED')`).Scan(&live); err != nil {
			t.Fatal(err)
		}
		return live == 0
	})
	checkRollups(t, r.pool)
}
