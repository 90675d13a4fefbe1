package readdb

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
)

// BenchmarkChartRead times the read behind a chart (its points and latency
// slots, ChartRows) of channel sms and of the whole system over each range,
// on eight days of rollups of three channels and their sum, folded as the
// writers' deltas are (AddRollups: a minute row and three latency slots a
// minute, and the hour rows that sum them); "7d from minutes" is the week
// read from the minute rollups, as it was before the hour rollups (migration
// 027). Run it with
// go test -run '^$' -bench BenchmarkChartRead ./internal/query/
func BenchmarkChartRead(b *testing.B) {
	pool := pgtest.New(b)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	var deltas []RollupDelta
	for m := range 8*1440 + 1 {
		minute := now.Add(-time.Duration(m) * time.Minute)
		for _, channel := range []string{"sms", "refund", "mail"} {
			for _, d := range []RollupDelta{{Measure: "sent", N: 120}, {Measure: "failed", N: 3}, {Measure: "in_doubt", N: 1},
				{Measure: "delivered", N: 100}, {Measure: "provider_errors", N: 4}, {Measure: "backoffs", N: 2},
				{Measure: "latency", Slot: 16, N: 40}, {Measure: "latency", Slot: 17, N: 40}, {Measure: "latency", Slot: 18, N: 40}} {
				d.Channel, d.Minute = channel, minute
				deltas = append(deltas, d)
			}
		}
	}
	if err := AddRollups(ctx, pool, deltas); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE effectd.minute_rollups, effectd.minute_latency, effectd.hour_rollups, effectd.hour_latency`); err != nil {
		b.Fatal(err)
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
