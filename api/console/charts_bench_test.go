package console

import (
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
)

// BenchmarkDrawCharts times drawing a page's charts (drawCharts and
// renderCharts, as console.charts does) for each range, with the
// scale bench's history: a value at every step and an audit entry every
// twenty minutes (at most ChartMarksLimit). Run it with
// go test -run '^$' -bench BenchmarkDrawCharts ./api/console/
func BenchmarkDrawCharts(b *testing.B) {
	for _, c := range []struct {
		name  string
		rg    effectdtype.ChartRange
		marks int
	}{
		{"1h", effectdtype.ChartRanges["1h"], 3},
		{"24h", effectdtype.ChartRanges["24h"], 72},
		{"7d", effectdtype.ChartRanges["7d"], effectdtype.ChartMarksLimit},
	} {
		b.Run(c.name, func(b *testing.B) {
			to := time.Now().UTC().Truncate(c.rg.Step).Add(c.rg.Step)
			chart := effectdtype.Chart{Range: c.name, From: to.Add(-c.rg.Range), To: to, StepSeconds: int64(c.rg.Step / time.Second)}
			backlog, age, p50, p99 := int64(40), 1.5, 12.0, 90.0
			for at := chart.From; at.Before(to); at = at.Add(c.rg.Step) {
				chart.Points = append(chart.Points, effectdtype.ChartPoint{At: at, Sent: 7200, Failed: 180, InDoubt: 60,
					Delivered: 6000, ProviderErrors: 240, Backoffs: 120, Backlog: &backlog, OldestDueSeconds: &age,
					LatencyP50Ms: &p50, LatencyP99Ms: &p99, Decided: 7260})
			}
			for i := range c.marks {
				chart.Marks = append(chart.Marks, effectdtype.ChartMark{At: to.Add(-time.Duration(i+1) * 20 * time.Minute),
					Actor: "bench", Action: "channel.pause", Channel: "sms"})
			}
			for b.Loop() {
				page, err := renderCharts(drawCharts(chart, "the whole system", "/ui/"))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(page)))
			}
		})
	}
}
