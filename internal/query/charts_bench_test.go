package query

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
)

// BenchmarkChartRead times the read behind a chart (its points and latency
// slots, ChartRows) of channel sms and of the whole system over each range,
// on eight days of rollups of three channels as the scale bench loads them
// (a minute row and three latency slots a minute, and the hour rows that sum
// them); "7d from minutes" is the week read from the minute rollups, as it
// was before the hour rollups (migration 027). Run it with
// go test -run '^$' -bench BenchmarkChartRead ./internal/query/
func BenchmarkChartRead(b *testing.B) {
	pool := pgtest.New(b)
	ctx := context.Background()
	for _, s := range []string{
		`INSERT INTO effectd.minute_rollups (channel, minute, sent, failed, in_doubt, delivered, provider_errors, backoffs, backlog, oldest_due_seconds)
		 SELECT c, date_trunc('minute', now()) - m * interval '1 minute', 120, 3, 1, 100, 4, 2, 40, 1.5
		 FROM unnest(ARRAY['sms', 'refund', 'mail', '*']) c, generate_series(0, 8 * 1440) m`,
		`INSERT INTO effectd.minute_latency (channel, minute, slot, n)
		 SELECT c, date_trunc('minute', now()) - m * interval '1 minute', s, 40
		 FROM unnest(ARRAY['sms', 'refund', 'mail', '*']) c, generate_series(0, 8 * 1440) m, generate_series(16, 18) s`,
		`INSERT INTO effectd.hour_rollups (channel, hour, sent, failed, in_doubt, delivered, provider_errors, backoffs, backlog, oldest_due_seconds)
		 SELECT channel, date_trunc('hour', minute, 'UTC'), sum(sent), sum(failed), sum(in_doubt), sum(delivered),
		        sum(provider_errors), sum(backoffs), max(backlog), max(oldest_due_seconds)
		 FROM effectd.minute_rollups GROUP BY 1, 2`,
		`INSERT INTO effectd.hour_latency (channel, hour, slot, n)
		 SELECT channel, date_trunc('hour', minute, 'UTC'), slot, sum(n) FROM effectd.minute_latency GROUP BY 1, 2, 3`,
		`VACUUM ANALYZE effectd.minute_rollups, effectd.minute_latency, effectd.hour_rollups, effectd.hour_latency`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			b.Fatalf("%.60s: %v", s, err)
		}
	}
	week := effectdtype.ChartRanges["7d"]
	for _, c := range []struct {
		name string
		rg   effectdtype.ChartRange
	}{
		{"1h", effectdtype.ChartRanges["1h"]}, {"24h", effectdtype.ChartRanges["24h"]}, {"7d", week},
		{"7d from minutes", week},
	} {
		for _, channels := range [][]string{{"sms"}, {AllChannels}} {
			b.Run(c.name+"/"+channels[0], func(b *testing.B) {
				points, latency := chartSQL(c.rg.Step)
				if c.name == "7d from minutes" {
					points, latency = chartPointsSQL, chartLatencySQL
				}
				to := time.Now().UTC().Truncate(c.rg.Step).Add(c.rg.Step)
				from := to.Add(-c.rg.Range)
				for b.Loop() {
					for _, sql := range []string{points, latency} {
						rows, err := pool.Query(ctx, sql, channels, from, to, c.rg.Step)
						if err != nil {
							b.Fatal(err)
						}
						rows.Close()
						if rows.Err() != nil {
							b.Fatal(rows.Err())
						}
					}
				}
			})
		}
	}
}
