package operator

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/readdb"
)

// Charts reads the chart of channels over rangeName ending at now's next
// minute: channels nil is the whole system, read from the rollups' sum over
// every channel; otherwise the rollups of the channels named, summed. It
// reads only the rollup rows and audit entries of the range.
func (svc *Service) Charts(ctx context.Context, channels []string, rangeName string, now time.Time) (effectdtype.Chart, error) {
	rg, ok := effectdtype.ChartRanges[rangeName]
	if !ok {
		return effectdtype.Chart{}, fmt.Errorf("%w: range: want 1h, 24h or 7d, not %q", ErrInvalid, rangeName)
	}
	to := now.UTC().Truncate(rg.Step).Add(rg.Step)
	from := to.Add(-rg.Range)
	rollupChannels, markChannels := channels, channels
	if channels == nil {
		rollupChannels = []string{readdb.AllChannels}
	}
	rows, slots, err := readdb.ChartRows(ctx, svc.pool, rollupChannels, from, to, rg.Step)
	if err != nil {
		return effectdtype.Chart{}, fmt.Errorf("charts: %w", err)
	}
	marks, err := readdb.ChartMarks(ctx, svc.pool, markChannels, from, to, effectdtype.ChartMarksLimit)
	if err != nil {
		return effectdtype.Chart{}, fmt.Errorf("charts: marks: %w", err)
	}
	out := effectdtype.Chart{Range: rangeName, From: from, To: to, StepSeconds: int64(rg.Step / time.Second),
		Points: chartPoints(from, to, rg.Step, rows, slots), Marks: marks}
	return out, nil
}

// chartPoints returns a point for every step from from to to, filled from
// the rows and latency slots read (a step without rows counts nothing).
func chartPoints(from, to time.Time, step time.Duration, rows []readdb.ChartRow, slots []readdb.LatencySlots) []effectdtype.ChartPoint {
	points := make([]effectdtype.ChartPoint, 0, int(to.Sub(from)/step))
	index := map[int64]int{}
	for at := from; at.Before(to); at = at.Add(step) {
		index[at.Unix()] = len(points)
		points = append(points, effectdtype.ChartPoint{At: at})
	}
	for _, r := range rows {
		i, ok := index[r.At.Unix()]
		if !ok {
			continue
		}
		points[i] = effectdtype.ChartPoint{At: points[i].At, Sent: r.Sent, Failed: r.Failed, InDoubt: r.InDoubt,
			Skipped: r.Skipped, Accepted: r.Accepted, Delivered: r.Delivered, Undelivered: r.Undelivered,
			ProviderErrors: r.ProviderErrors, Backoffs: r.Backoffs, Backlog: r.Backlog, OldestDueSeconds: r.OldestDueSeconds}
	}
	histograms := map[int][]readdb.LatencySlots{}
	for _, s := range slots {
		if i, ok := index[s.At.Unix()]; ok {
			histograms[i] = append(histograms[i], s)
		}
	}
	for i, h := range histograms {
		points[i].Decided, points[i].LatencyP50Ms, points[i].LatencyP99Ms = latencyQuantiles(h)
	}
	return points
}

// latencyQuantiles returns how many decisions a histogram holds and its p50
// and p99 in milliseconds: the geometric middle of the slot the quantile
// falls in (slot i from 2^(i/2) ms to 2^((i+1)/2) ms; slot 0 from 0).
func latencyQuantiles(h []readdb.LatencySlots) (int64, *float64, *float64) {
	sort.Slice(h, func(a, b int) bool { return h[a].Slot < h[b].Slot })
	var total int64
	for _, s := range h {
		total += s.N
	}
	if total == 0 {
		return 0, nil, nil
	}
	quantile := func(q float64) *float64 {
		rank := int64(math.Ceil(q * float64(total)))
		var seen int64
		for _, s := range h {
			seen += s.N
			if seen >= rank {
				v := math.Round(math.Pow(2, (float64(s.Slot)+0.5)/2)*10) / 10
				return &v
			}
		}
		return nil
	}
	return total, quantile(0.50), quantile(0.99)
}
