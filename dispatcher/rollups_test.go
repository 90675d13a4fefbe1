package dispatcher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
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

// checkRollups waits for the dispatcher's folder to fold the rollups'
// deltas, and compares the last hour's chart of channel c, and of the whole
// system, with the history rollupEvents makes under rollupScript, the
// deliveries with the intents' own.
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
	read := func() bool {
		for _, channels := range [][]string{{"c"}, nil} {
			chart, err := dispatcher.Charts(ctx, pool, channels, "1h", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got[fmt.Sprint(channels)] = chartTotals(chart)
		}
		return got["[c]"] == want && got["[]"] == want
	}
	deadline := time.Now().Add(30 * time.Second) // the folder folds every 5 s
	for !read() {
		if time.Now().After(deadline) {
			t.Fatalf("the last hour's rollups\n got %+v\nwant %+v for channel c and the whole system", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

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
